// MQ from Python: Producer, Consumer and Message over sluice::mq. A
// produced value takes the KV put's path (written once into the pool: a
// large dict or tensor straight into a reservation); a delivered message's
// value is what a get gives — a View, or a dict of scalars and Views — that
// aliases the pool. The iterator protocols are in python/sluice/_mq.py.
#include <sluice/mq.hpp>

#include <mutex>

#include "python/src/common.hpp"
#include "python/src/values.hpp"

namespace sluice::python {
namespace {

std::chrono::milliseconds seconds_ms(double seconds, std::string_view what) {
  if (!(seconds >= 0)) raise(errc::invalid_argument, std::string{what} + " is a number of seconds, at least 0");
  return std::chrono::milliseconds{static_cast<std::int64_t>(seconds * 1000.0 + 0.5)};
}

full_policy policy_of(const std::string& name) {
  if (name == "block") return full_policy::block;
  if (name == "reject") return full_policy::reject;
  if (name == "drop_oldest") return full_policy::drop_oldest;
  raise(errc::invalid_argument, "when_full is 'block', 'reject' or 'drop_oldest', not '" + name + "'");
}

const char* policy_name(full_policy p) {
  switch (p) {
    case full_policy::block: return "block";
    case full_policy::reject: return "reject";
    case full_policy::drop_oldest: return "drop_oldest";
  }
  return "block";
}

/// A Producer: one sluice::mq (one producer identity) over the client.
struct py_producer {
  std::shared_ptr<client_holder> h;
  std::unique_ptr<sluice::mq> queue;

  sluice::mq& use(std::string_view what) {
    h->use(what);
    return *queue;
  }
};

/// A consumer-group member, shared by the Consumer and the Messages it
/// delivered (so a message can be acked while its consumer object is
/// gone). The member leaves the group when the last of them goes.
struct consumer_core {
  std::shared_ptr<client_holder> h;
  std::optional<mq_consumer> consumer;
  std::atomic<bool> closed{false};

  ~consumer_core() {
    // Leaving waits for the master's answer: never with the GIL held.
    if (python_alive() && PyGILState_Check() != 0) {
      py::gil_scoped_release released;
      consumer.reset();
    } else {
      consumer.reset();
    }
  }

  mq_consumer& use(std::string_view what) {
    h->use(what);
    if (closed.load(std::memory_order_acquire)) raise_closed(std::string{what} + " on a closed consumer");
    return *consumer;
  }
};

struct py_consumer {
  std::shared_ptr<consumer_core> core;
  std::size_t batch = 16;
  std::chrono::milliseconds wait{1000};
};

/// A delivered message: where it sits, its value, and the member that may settle it.
struct py_message {
  std::shared_ptr<consumer_core> core;
  mq_message m;  ///< payload moved out into `value`
  py::object value;
  py::object error;  ///< the exception when the payload could not be read
};

/// Produces `plan` once into the pool: one buffer with the message, or
/// written into a reservation. Called without the GIL.
result<produced> run_produce(sluice::mq& q, std::string_view topic, const put_plan& plan,
                             const produce_options& options) {
  if (one_buffer(plan)) {
    auto bytes = assemble(plan);
    if (!bytes) return std::move(bytes).error();
    return q.produce(topic, *bytes, options);
  }
  auto room = q.reserve(topic, plan.size(), options.timeout);
  if (!room) return std::move(room).error();
  if (auto written = plan.write_into(room->bytes()); !written) return std::move(written).error();
  return q.produce(std::move(*room), options);
}

py::dict topic_dict(const topic_info& t) {
  py::dict d;
  d["name"] = t.name;
  d["partitions"] = t.options.partitions;
  d["max_age"] = t.options.max_age.count() / 1000.0;
  d["max_bytes"] = t.options.max_bytes;
  d["max_messages"] = t.options.max_messages;
  d["when_full"] = policy_name(t.options.when_full);
  d["payload_replicas"] = t.options.payload_replicas;
  d["max_message_bytes"] = t.options.max_message_bytes;
  d["dedupe_window"] = t.options.dedupe_window.count() / 1000.0;
  d["dedupe_entries"] = t.options.dedupe_entries;
  d["dead_letter"] = t.options.dead_letter;
  py::list parts;
  for (auto& p : t.partitions) {
    py::dict pd;
    pd["start"] = p.start;
    pd["end"] = p.end;
    pd["bytes"] = p.bytes;
    parts.append(pd);
  }
  d["partition_info"] = parts;
  return d;
}

py::object produced_object(const produced& p) {
  // Kept for the life of the process: never dropped after Python is gone.
  static auto* type = new py::object(py::module_::import("sluice._mq").attr("Produced"));
  return (*type)(p.partition, p.offset, p.duplicate);
}

}  // namespace

void bind_mq(py::module_& m, py::class_<py_client>& client_class) {
  py::class_<py_producer>(m, "Producer", R"doc(
Produces messages to topics, and manages topics and groups. Make one with
Client.producer(name=None): the name identifies the producer for dedupe
(the same name after a restart dedupes retries of the old process).
Safe to use from many threads.
)doc")
      .def(
          "produce",
          [](py_producer& p, std::string_view topic, py::handle value, std::optional<std::string> key,
             std::optional<std::string> msg_id, std::optional<std::uint32_t> partition,
             std::optional<double> timeout) {
            auto& q = p.use("produce");
            produce_options o;
            o.key = key.value_or("");
            o.message_id = msg_id.value_or("");
            o.partition = partition;
            o.timeout = to_timeout(timeout);
            auto plan = plan_put(value);
            auto done = without_gil([&] { return run_produce(q, topic, *plan, o); });
            check_signals();
            return produced_object(unwrap(std::move(done)));
          },
          py::arg("topic"), py::arg("value"), py::kw_only(), py::arg("key") = py::none(),
          py::arg("msg_id") = py::none(), py::arg("partition") = py::none(), py::arg("timeout") = py::none(),
          "Writes value once into the pool and appends a message naming it; returns Produced(partition, offset, "
          "duplicate) once committed. A full topic that blocks waits for room until the deadline (Overloaded then).")
      .def(
          "produce_many",
          [](py_producer& p, std::string_view topic, py::sequence values, std::optional<std::vector<std::string>> keys,
             std::optional<std::vector<std::string>> msg_ids, std::optional<double> timeout, bool return_exceptions) {
            auto& q = p.use("produce_many");
            auto n = py::len(values);
            if (keys && keys->size() != n) raise(errc::invalid_argument, "produce_many: one key per value");
            if (msg_ids && msg_ids->size() != n) raise(errc::invalid_argument, "produce_many: one msg_id per value");
            std::vector<std::unique_ptr<put_plan>> plans;
            plans.reserve(n);
            bool plain = true;
            for (auto v : values) {
              plans.push_back(plan_put(v));
              plain = plain && plans.back()->kind == put_plan::shape::bytes;
            }
            auto ms = to_timeout(timeout);
            std::vector<result<produced>> done;
            {
              signal_watch watch;
              {
                py::gil_scoped_release released;
                if (plain) {
                  // Plain buffers: their payloads put pipelined, one append.
                  std::vector<mq_item> items(n);
                  for (std::size_t i = 0; i < n; ++i) {
                    items[i].bytes = plans[i]->bytes;
                    if (keys) items[i].key = (*keys)[i];
                    if (msg_ids) items[i].message_id = (*msg_ids)[i];
                  }
                  done = q.produce_batch(topic, items, ms);
                } else {
                  for (std::size_t i = 0; i < n; ++i) {
                    produce_options o;
                    o.timeout = ms;
                    if (keys) o.key = (*keys)[i];
                    if (msg_ids) o.message_id = (*msg_ids)[i];
                    done.push_back(run_produce(q, topic, *plans[i], o));
                  }
                }
              }
              watch.rethrow();
            }
            check_signals();
            py::list out;
            for (auto& r : done) {
              if (r) {
                out.append(produced_object(*r));
              } else if (return_exceptions) {
                out.append(exception_of(r.error()));
              } else {
                raise(r.error());
              }
            }
            return out;
          },
          py::arg("topic"), py::arg("values"), py::kw_only(), py::arg("keys") = py::none(),
          py::arg("msg_ids") = py::none(), py::arg("timeout") = py::none(), py::arg("return_exceptions") = false,
          "Several messages to one topic, in order; one Produced per value. Buffers are put pipelined and "
          "appended with one request.")
      .def(
          "create_topic",
          [](py_producer& p, std::string_view name, std::uint32_t partitions, double max_age, std::uint64_t max_bytes,
             std::uint64_t max_messages, const std::string& when_full, std::uint32_t payload_replicas,
             std::uint64_t max_message_bytes, double dedupe_window, std::uint64_t dedupe_entries,
             std::string dead_letter, std::optional<double> timeout) {
            auto& q = p.use("create_topic");
            topic_options o;
            o.partitions = partitions;
            o.max_age = seconds_ms(max_age, "max_age");
            o.max_bytes = max_bytes;
            o.max_messages = max_messages;
            o.when_full = policy_of(when_full);
            o.payload_replicas = payload_replicas;
            o.max_message_bytes = max_message_bytes;
            o.dedupe_window = seconds_ms(dedupe_window, "dedupe_window");
            o.dedupe_entries = dedupe_entries;
            o.dead_letter = std::move(dead_letter);
            o.timeout = to_timeout(timeout);
            auto done = without_gil([&] { return q.create_topic(name, o); });
            check_signals();
            return unwrap(std::move(done));
          },
          py::arg("name"), py::kw_only(), py::arg("partitions") = 1, py::arg("max_age") = 0.0,
          py::arg("max_bytes") = 0, py::arg("max_messages") = 0, py::arg("when_full") = "block",
          py::arg("payload_replicas") = 1, py::arg("max_message_bytes") = std::uint64_t{64} << 20,
          py::arg("dedupe_window") = 0.0, py::arg("dedupe_entries") = 0, py::arg("dead_letter") = "",
          py::arg("timeout") = py::none(),
          "Creates a topic: True when created, False when it exists with these options (Conflict with others). "
          "Limits of 0 are none; max_age and dedupe_window in seconds. A message that runs out of deliveries "
          "in a group goes to the dead_letter topic (same payload, message_id naming its origin), or is "
          "dropped when there is none.")
      .def(
          "delete_topic",
          [](py_producer& p, std::string_view name, std::optional<double> timeout) {
            auto& q = p.use("delete_topic");
            auto done = without_gil([&] { return q.delete_topic(name, to_timeout(timeout)); });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("name"), py::kw_only(), py::arg("timeout") = py::none(), "Deletes a topic and its messages.")
      .def(
          "topics",
          [](py_producer& p, std::optional<double> timeout) {
            auto& q = p.use("topics");
            auto done = without_gil([&] { return q.topics(to_timeout(timeout)); });
            check_signals();
            py::list out;
            for (auto& t : unwrap(std::move(done))) out.append(topic_dict(t));
            return out;
          },
          py::kw_only(), py::arg("timeout") = py::none(), "Every topic as a dict of its options and partition_info.")
      .def(
          "lag",
          [](py_producer& p, std::string_view group, std::optional<double> timeout) {
            auto& q = p.use("lag");
            auto done = without_gil([&] { return q.lag(group, to_timeout(timeout)); });
            check_signals();
            py::list out;
            for (auto& l : unwrap(std::move(done))) {
              py::dict d;
              d["group"] = l.group;
              d["topic"] = l.topic;
              d["partition"] = l.partition;
              d["member"] = l.member;
              d["committed"] = l.committed;
              d["next"] = l.next;
              d["in_flight"] = l.in_flight;
              d["messages"] = l.messages;
              d["bytes"] = l.bytes;
              out.append(d);
            }
            return out;
          },
          py::arg("group") = "", py::kw_only(), py::arg("timeout") = py::none(),
          "How far a group (every group, when empty) is behind, per partition: a list of dicts.")
      .def(
          "delete_group",
          [](py_producer& p, std::string_view group, std::optional<double> timeout) {
            auto& q = p.use("delete_group");
            auto done = without_gil([&] { return q.delete_group(group, to_timeout(timeout)); });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("group"), py::kw_only(), py::arg("timeout") = py::none(), "Deletes a group and its offsets.");

  py::class_<py_message>(m, "Message", R"doc(
A delivered message: topic, partition, offset, delivery_count (1 the first
time), message_id (the producer's; in a dead-letter topic
"TOPIC/PARTITION/OFFSET@GROUP", where it ran out of deliveries) and value (a View, or a dict of scalars and Views, aliasing the pool;
None when the payload could not be read, then error says why). ack() or
nack() it through the consumer that received it.
)doc")
      .def_property_readonly("topic", [](py_message& x) { return x.m.topic; })
      .def_property_readonly("partition", [](py_message& x) { return x.m.partition; })
      .def_property_readonly("offset", [](py_message& x) { return x.m.offset; })
      .def_property_readonly("delivery_count", [](py_message& x) { return x.m.delivery_count; })
      .def_property_readonly("message_id",
                             [](py_message& x) {
                               // Ids from C++ producers may be any bytes: they come back as str either way.
                               auto* id = PyUnicode_DecodeUTF8(x.m.message_id.data(),
                                                               static_cast<Py_ssize_t>(x.m.message_id.size()),
                                                               "surrogateescape");
                               if (id == nullptr) throw py::error_already_set();
                               return py::reinterpret_steal<py::str>(id);
                             })
      .def_property_readonly("value", [](py_message& x) { return x.value; })
      .def_property_readonly("error", [](py_message& x) { return x.error; })
      .def(
          "ack",
          [](py_message& x) {
            auto& c = x.core->use("ack");
            auto done = without_gil([&] { return c.ack(x.m); });
            check_signals();
            unwrap(std::move(done));
          },
          "Done with: never delivered to this group again. Conflict when its partition moved to another member "
          "since; NotFound when it is not held unacked.")
      .def(
          "nack",
          [](py_message& x, double delay) {
            auto& c = x.core->use("nack");
            auto d = seconds_ms(delay, "delay");
            auto done = without_gil([&] { return c.nack(x.m, d); });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("delay") = 0.0, "Gives the message back, to be delivered again after delay seconds.")
      .def("__repr__", [](py_message& x) {
        return "<sluice.Message " + x.m.topic + "[" + std::to_string(x.m.partition) + "]@" +
               std::to_string(x.m.offset) + " delivery " + std::to_string(x.m.delivery_count) + ">";
      });

  py::class_<py_consumer>(m, "Consumer", py::dynamic_attr(), R"doc(
One member of a consumer group, made by Client.consumer(group, topics).
poll() returns a list of Messages; iterating (for, or async for) yields
them one by one, polling as needed, until the consumer is closed. Leaves
the group on close(), at the end of a with block, or when it and every
Message it delivered are gone. poll in one thread and ack from others is fine.
)doc")
      .def_property_readonly("group", [](py_consumer& c) { return c.core->use("group").group(); })
      .def_property_readonly("closed", [](py_consumer& c) { return c.core->closed.load(); })
      .def_property_readonly("batch", [](py_consumer& c) { return c.batch; })
      .def_property_readonly("wait", [](py_consumer& c) { return c.wait.count() / 1000.0; })
      .def(
          "poll",
          [](py_consumer& c, std::size_t max_messages, std::uint64_t max_bytes, std::optional<double> wait,
             std::optional<std::vector<py_message*>> ack) {
            auto& consumer = c.core->use("poll");
            if (max_messages < 1 || max_messages > 1024) raise(errc::invalid_argument, "max_messages is 1 to 1024");
            poll_options o;
            o.max_messages = max_messages;
            o.max_bytes = max_bytes;
            o.wait = wait ? seconds_ms(*wait, "wait") : c.wait;
            // What to ack first: the same fields ack() sends, without the payloads.
            std::vector<mq_message> acks;
            if (ack) {
              acks.reserve(ack->size());
              for (auto* x : *ack) {
                if (x == nullptr) raise(errc::invalid_argument, "ack takes Messages");
                acks.push_back(mq_message{x->m.topic, x->m.partition, x->m.offset, x->m.delivery_count, value{},
                                          x->m.generation, {}});
              }
            }
            auto done = without_gil([&] { return ack ? consumer.ack_and_poll(acks, o) : consumer.poll(o); });
            check_signals();
            py::list out;
            for (auto& msg : unwrap(std::move(done))) {
              py_message x{c.core, {}, py::none(), py::none()};
              if (msg.payload) {
                x.value = to_python(c.core->h, std::move(*msg.payload), false);
              } else {
                x.error = exception_of(msg.payload.error());
              }
              msg.payload = value{};
              x.m = std::move(msg);
              out.append(py::cast(std::move(x)));
            }
            return out;
          },
          py::arg("max_messages") = 16, py::arg("max_bytes") = 0, py::arg("wait") = py::none(), py::kw_only(),
          py::arg("ack") = py::none(),
          "Messages from this member's partitions (redeliveries first, each partition in offset order); waits up "
          "to wait seconds (default: the consumer's) when there are none, woken as soon as one is produced. An "
          "empty list: nothing came in time. ack: Messages (at most 1024) acked first, in the same request: "
          "committed before the poll runs; the first refused raises its error and nothing is polled (the acks "
          "before it stand).")
      .def(
          "ack",
          [](py_consumer& c, py_message& x) {
            auto& consumer = c.core->use("ack");
            auto done = without_gil([&] { return consumer.ack(x.m); });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("message"), "message.ack().")
      .def(
          "nack",
          [](py_consumer& c, py_message& x, double delay) {
            auto& consumer = c.core->use("nack");
            auto d = seconds_ms(delay, "delay");
            auto done = without_gil([&] { return consumer.nack(x.m, d); });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("message"), py::arg("delay") = 0.0, "message.nack(delay).")
      .def(
          "ack_upto",
          [](py_consumer& c, std::string_view topic, std::uint32_t partition, std::uint64_t offset) {
            auto& consumer = c.core->use("ack_upto");
            auto done = without_gil([&] { return consumer.ack_upto(topic, partition, offset); });
            check_signals();
            return unwrap(std::move(done));
          },
          py::arg("topic"), py::arg("partition"), py::arg("offset"),
          "Acks every message of the partition this member holds at or below offset; returns how many.")
      .def(
          "seek",
          [](py_consumer& c, std::string_view topic, std::uint32_t partition, std::optional<std::uint64_t> offset,
             std::optional<double> time) {
            auto& consumer = c.core->use("seek");
            if (offset.has_value() == time.has_value()) raise(errc::invalid_argument, "seek takes an offset or a time");
            auto done = without_gil([&] {
              if (offset) return consumer.seek(topic, partition, *offset);
              return consumer.seek_time(topic, partition, static_cast<std::int64_t>(*time * 1000.0));
            });
            check_signals();
            unwrap(std::move(done));
          },
          py::arg("topic"), py::arg("partition"), py::arg("offset") = py::none(), py::kw_only(),
          py::arg("time") = py::none(),
          "The group reads the partition from offset on next, or from the first message produced at or after "
          "time (seconds since the Unix epoch).")
      .def(
          "close",
          [](py_consumer& c) {
            if (c.core->closed.exchange(true)) return;
            auto& consumer = *c.core->consumer;
            auto done = without_gil([&] { return consumer.close(); });
            check_signals();
            unwrap(std::move(done));
          },
          "Leaves the group now: its partitions and unacked messages go to the other members.");

  client_class
      .def(
          "producer",
          [](py_client& c, std::optional<std::string> name) {
            auto& cl = c.h->use("producer");
            return py_producer{c.h, std::make_unique<sluice::mq>(cl, name.value_or(""))};
          },
          py::arg("name") = py::none(),
          "A Producer; name identifies it for dedupe across restarts (None: a fresh identity).")
      .def(
          "_consumer",
          [](py_client& c, std::string_view group, std::vector<std::string> topics, double ack_timeout,
             std::uint32_t max_deliveries, std::uint32_t prefetch, bool from_latest, double lease, std::size_t batch,
             double wait, std::optional<double> timeout) {
            auto& cl = c.h->use("consumer");
            if (topics.empty()) raise(errc::invalid_argument, "a consumer reads at least one topic");
            if (batch < 1 || batch > 1024) raise(errc::invalid_argument, "batch is 1 to 1024");
            consumer_options o;
            o.ack_timeout = seconds_ms(ack_timeout, "ack_timeout");
            o.max_deliveries = max_deliveries;
            o.prefetch = prefetch;
            o.from_latest = from_latest;
            o.lease = seconds_ms(lease, "lease");
            o.timeout = to_timeout(timeout);
            sluice::mq q{cl};
            auto joined = without_gil([&] { return q.subscribe(group, std::move(topics), o); });
            check_signals();
            auto core = std::make_shared<consumer_core>();
            core->h = c.h;
            core->consumer.emplace(unwrap(std::move(joined)));
            return py_consumer{std::move(core), batch, seconds_ms(wait, "wait")};
          },
          py::arg("group"), py::arg("topics"), py::arg("ack_timeout"), py::arg("max_deliveries"), py::arg("prefetch"),
          py::arg("from_latest"), py::arg("lease"), py::arg("batch"), py::arg("wait"), py::arg("timeout"));
}

}  // namespace sluice::python
