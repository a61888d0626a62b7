// sluice::mq and sluice::mq_consumer: the thread-facing shell of MQ. A
// produce puts the payload as an object under `~mq/<topic>/` (written once
// into the pool, in place through a reservation when large) and then asks
// the master, through the owner, to append a shell naming it. A poll asks
// the master for deliveries and reads their payloads with one batched get:
// views into the pool.
#include "sluice/mq.hpp"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>

#include "actors/common/mq_reply.hpp"
#include "api/src/kv_calls.hpp"
#include "sluice/client.hpp"
#include "sluice/dict.hpp"

namespace sluice {
namespace {

/// Told apart from every other process's payload keys, whatever the
/// producer's name.
std::uint64_t process_nonce() {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return nonce;
}

std::atomic<std::uint64_t> payload_seq{0};

/// Messages in one append request to the master (its bound).
constexpr std::size_t mq_produce_batch_max = 1024;

std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 0xF];
  return out;
}

result<void> ok_reply(result<wire::message>& reply) {
  auto body = reply_body<wire::ok_reply>(reply);
  if (!body) return std::move(body).error();
  return {};
}

/// Asks on the calling thread's own shm channel to the owner when there
/// is one (no hand-off to the client node's threads), through the client
/// node otherwise, and waits for the answer.
template <class T, class Convert>
result<T> ask_mq(client::impl& c, const wire::body& request, std::chrono::milliseconds timeout, Convert convert) {
  auto reply = ask(c, request, {}, effective(c, timeout));
  return convert(reply);
}

wire::mq_topic_config wire_config(const topic_options& o) {
  wire::mq_topic_config w;
  w.partitions = o.partitions;
  w.max_age_ms = o.max_age.count();
  w.max_bytes = o.max_bytes;
  w.max_messages = o.max_messages;
  w.full = static_cast<wire::mq_full>(o.when_full);
  w.payload_replicas = o.payload_replicas;
  w.max_message_bytes = o.max_message_bytes;
  w.dedupe_window_ms = o.dedupe_window.count();
  w.dedupe_entries_max = o.dedupe_entries;
  w.dead_letter = o.dead_letter;
  return w;
}

topic_options public_config(const wire::mq_topic_config& w) {
  topic_options o;
  o.partitions = w.partitions;
  o.max_age = std::chrono::milliseconds{w.max_age_ms};
  o.max_bytes = w.max_bytes;
  o.max_messages = w.max_messages;
  o.when_full = static_cast<full_policy>(w.full);
  o.payload_replicas = w.payload_replicas;
  o.max_message_bytes = w.max_message_bytes;
  o.dedupe_window = std::chrono::milliseconds{w.dedupe_window_ms};
  o.dedupe_entries = w.dedupe_entries_max;
  o.dead_letter = w.dead_letter;
  return o;
}

/// The settle naming one delivery (ack or nack).
wire::mq_settle settle_of(const mq_message& m, wire::mq_settle_kind kind) {
  wire::mq_settle s;
  s.kind = kind;
  s.partition = {m.topic, m.partition};
  s.offset = m.offset;
  s.generation = m.generation;
  return s;
}

}  // namespace

// --- the consumer --------------------------------------------------------

struct mq_consumer::impl {
  client* owner = nullptr;
  client::impl* c = nullptr;
  std::string group;
  wire::mq_join join;
  consumer_options options;
  /// Joins are made one at a time; every other call may run alongside.
  std::mutex join_mutex;
  std::atomic<bool> joined{false};
  /// Polls sent, and the last one whose answer came (wire::mq_poll): the
  /// master hands out again at once what a lost answer carried, and an
  /// ack_upto never settles it.
  std::atomic<std::uint64_t> polls{0};
  std::atomic<std::uint64_t> answered{0};

  void poll_answered(std::uint64_t seq) {
    auto seen = answered.load(std::memory_order_relaxed);
    while (seen < seq && !answered.compare_exchange_weak(seen, seq, std::memory_order_relaxed)) {
    }
  }

  result<void> do_join() {
    std::lock_guard lock{join_mutex};
    auto reply = ask_mq<wire::mq_joined>(*c, wire::mq{join}, options.timeout, mq_reply<wire::mq_joined>);
    if (!reply) return std::move(reply).error();
    joined.store(true, std::memory_order_release);
    return {};
  }

  template <class T, class Convert>
  result<T> ask(wire::mq_body body, std::chrono::milliseconds timeout, Convert convert) {
    return ask_mq<T>(*c, wire::mq{std::move(body)}, timeout, std::move(convert));
  }

  /// One poll, carrying `settles` (applied first; wire::mq_poll::settles).
  result<std::vector<mq_message>> poll(std::vector<wire::mq_settle> settles, const poll_options& options) {
    if (!joined) {
      if (auto ok = do_join(); !ok) return std::move(ok).error();
    }
    wire::mq_poll p{group,
                    0,
                    static_cast<std::uint32_t>(std::min<std::size_t>(options.max_messages, 1024)),
                    options.max_bytes,
                    static_cast<std::uint64_t>(std::max<std::int64_t>(options.wait.count(), 0)),
                    polls.fetch_add(1, std::memory_order_relaxed) + 1,
                    answered.load(std::memory_order_relaxed),
                    std::move(settles)};
    auto timeout = options.wait + effective(*c, this->options.timeout);
    auto convert = mq_reply<wire::mq_polled>;
    auto polled = ask<wire::mq_polled>(p, timeout, convert);
    if (!polled && polled.code() == errc::not_found &&
        polled.error().message().find("join first") != std::string::npos) {
      // The master forgot the member (it restarted, or the lease lapsed):
      // join again, then poll. What it held goes out again, to whichever
      // member holds its partition now: acks for it would be refused.
      if (auto ok = do_join(); !ok) return std::move(ok).error();
      p.settles.clear();
      polled = ask<wire::mq_polled>(p, timeout, convert);
    }
    if (!polled) return std::move(polled).error();
    poll_answered(p.poll_seq);
    std::vector<std::string_view> keys;
    keys.reserve(polled->deliveries.size());
    for (auto& d : polled->deliveries) keys.push_back(d.payload);
    auto values = owner->get_batch(keys, call_options{this->options.timeout});
    std::vector<mq_message> out;
    out.reserve(polled->deliveries.size());
    for (std::size_t i = 0; i < polled->deliveries.size(); ++i) {
      auto& d = polled->deliveries[i];
      out.push_back(mq_message{std::move(d.partition.topic), d.partition.partition, d.offset, d.delivery_count,
                               std::move(values[i]), d.generation, std::move(d.message_id)});
    }
    return out;
  }

  result<std::uint64_t> settle(wire::mq_settle s) {
    s.group = group;
    return ask<std::uint64_t>(std::move(s), options.timeout, [](result<wire::message>& reply) -> result<std::uint64_t> {
      auto settled = mq_reply<wire::mq_settled>(reply);
      if (!settled) return std::move(settled).error();
      return settled->count;
    });
  }
};

mq_consumer::mq_consumer(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
mq_consumer::mq_consumer(mq_consumer&&) noexcept = default;
mq_consumer& mq_consumer::operator=(mq_consumer&& other) noexcept {
  if (this != &other) {
    (void)close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
mq_consumer::~mq_consumer() { (void)close(); }

const std::string& mq_consumer::group() const noexcept { return impl_->group; }

result<std::vector<mq_message>> mq_consumer::poll(const poll_options& options) {
  return impl_->poll({}, options);
}

result<std::vector<mq_message>> mq_consumer::ack_and_poll(std::span<const mq_message> done,
                                                          const poll_options& options) {
  if (done.size() > wire::mq_poll_settles_max) {
    return fail(errc::invalid_argument, "ack_and_poll acks at most " + std::to_string(wire::mq_poll_settles_max) +
                                            " messages at once, not " + std::to_string(done.size()));
  }
  std::vector<wire::mq_settle> settles;
  settles.reserve(done.size());
  for (auto& m : done) settles.push_back(settle_of(m, wire::mq_settle_kind::ack));
  return impl_->poll(std::move(settles), options);
}

result<void> mq_consumer::ack(const mq_message& m) {
  auto n = impl_->settle(settle_of(m, wire::mq_settle_kind::ack));
  if (!n) return std::move(n).error();
  return {};
}

result<std::uint64_t> mq_consumer::ack_upto(std::string_view topic, std::uint32_t partition, std::uint64_t offset) {
  wire::mq_settle s;
  s.kind = wire::mq_settle_kind::ack_upto;
  s.partition = {std::string{topic}, partition};
  s.offset = offset;
  s.answered_seq = impl_->answered.load(std::memory_order_relaxed);
  return impl_->settle(std::move(s));
}

result<void> mq_consumer::nack(const mq_message& m, std::chrono::milliseconds delay) {
  auto s = settle_of(m, wire::mq_settle_kind::nack);
  s.delay_ms = std::max<std::int64_t>(delay.count(), 0);
  auto n = impl_->settle(std::move(s));
  if (!n) return std::move(n).error();
  return {};
}

result<void> mq_consumer::seek(std::string_view topic, std::uint32_t partition, std::uint64_t offset) {
  wire::mq_seek s{impl_->group, {std::string{topic}, partition}, false, offset, 0};
  return impl_->ask<void>(std::move(s), impl_->options.timeout, ok_reply);
}

result<void> mq_consumer::seek_time(std::string_view topic, std::uint32_t partition, std::int64_t time_ms) {
  wire::mq_seek s{impl_->group, {std::string{topic}, partition}, true, 0, time_ms};
  return impl_->ask<void>(std::move(s), impl_->options.timeout, ok_reply);
}

result<void> mq_consumer::close() {
  if (!impl_ || !impl_->joined.exchange(false, std::memory_order_acq_rel)) return {};
  return impl_->ask<void>(wire::mq_leave{impl_->group, 0}, impl_->options.timeout, ok_reply);
}

// --- mq ----------------------------------------------------------------------

/// A topic's payload replicas and largest message, as produce last
/// learned them. Bounded by the topics the master holds.
struct mq::topic_cache {
  std::mutex mutex;
  std::map<std::string, topic_options, std::less<>> known;
};

mq::mq(client& c, std::string_view producer) : client_(&c), topics_(std::make_shared<topic_cache>()) {
  if (producer.empty()) {
    std::random_device rd;
    producer_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  } else {
    producer_ = XXH64(producer.data(), producer.size(), 0);
  }
  if (producer_ == 0) producer_ = 1;
}

result<bool> mq::create_topic(std::string_view name, const topic_options& options) {
  wire::mq_create_topic c{std::string{name}, wire_config(options)};
  return ask_mq<bool>(*client_->impl_, wire::mq{std::move(c)}, options.timeout,
                      [](result<wire::message>& reply) -> result<bool> {
                        auto created = mq_reply<wire::mq_topic_created>(reply);
                        if (!created) return std::move(created).error();
                        return created->created;
                      });
}

result<void> mq::delete_topic(std::string_view name, std::chrono::milliseconds timeout) {
  return ask_mq<void>(*client_->impl_, wire::mq{wire::mq_delete_topic{std::string{name}}}, timeout, ok_reply);
}

result<std::vector<topic_info>> mq::topics(std::chrono::milliseconds timeout) {
  return ask_mq<std::vector<topic_info>>(
      *client_->impl_, wire::mq{wire::mq_list_topics{}}, timeout,
      [](result<wire::message>& reply) -> result<std::vector<topic_info>> {
        auto listed = mq_reply<wire::mq_topics>(reply);
        if (!listed) return std::move(listed).error();
        std::vector<topic_info> out;
        for (auto& t : listed->topics) {
          topic_info info{t.topic, public_config(t.config), {}};
          for (auto& p : t.partitions) info.partitions.push_back({p.start, p.end, p.bytes});
          out.push_back(std::move(info));
        }
        return out;
      });
}

result<topic_options> mq::config_of(std::string_view topic, std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock{topics_->mutex};
    if (auto it = topics_->known.find(topic); it != topics_->known.end()) return it->second;
  }
  // Learned once. (A topic deleted and made again with more replicas is
  // seen by a new mq, or after a produce found it gone.)
  auto listed = topics(timeout);
  if (!listed) return std::move(listed).error();
  std::lock_guard lock{topics_->mutex};
  topics_->known.clear();
  for (auto& t : *listed) topics_->known.emplace(t.name, t.options);
  auto it = topics_->known.find(topic);
  if (it == topics_->known.end()) return fail(errc::not_found, "no topic '" + std::string{topic} + "'");
  return it->second;
}

std::string mq::payload_key(std::string_view topic) const {
  return "~mq/" + std::string{topic} + "/" + hex(producer_) + "/" + hex(process_nonce()) + "-" +
         hex(payload_seq.fetch_add(1, std::memory_order_relaxed));
}

namespace {

result<void> check_size(std::string_view topic, const topic_options& config, std::uint64_t size) {
  if (size <= config.max_message_bytes) return {};
  return fail(errc::invalid_argument, "the message is " + std::to_string(size) + " bytes; topic '" +
                                          std::string{topic} + "' takes at most " +
                                          std::to_string(config.max_message_bytes));
}

put_options payload_put(const topic_options& config, std::chrono::milliseconds timeout) {
  put_options put;
  put.timeout = timeout;
  put.replicas = config.payload_replicas;
  return put;
}

mq_item item_of(const produce_options& o) { return mq_item{{}, o.key, o.message_id, o.partition}; }

}  // namespace

std::vector<result<produced>> mq::append(std::string_view topic, std::vector<std::string> keys,
                                         std::span<const mq_item> items, std::span<const std::uint64_t> sizes,
                                         std::chrono::milliseconds timeout) {
  auto& c = *client_->impl_;
  std::vector<result<produced>> out;
  out.reserve(keys.size());
  for (std::size_t first = 0; first < keys.size(); first += mq_produce_batch_max) {
    auto n = std::min(keys.size() - first, mq_produce_batch_max);
    wire::mq_produce p{std::string{topic}, producer_, {}};
    p.messages.reserve(n);
    for (std::size_t i = first; i < first + n; ++i) {
      p.messages.push_back(wire::mq_message{keys[i], sizes[i], items[i].message_id, items[i].key,
                                            items[i].partition.has_value(), items[i].partition.value_or(0)});
    }
    auto done = ask_mq<std::vector<result<produced>>>(
        c, wire::mq{std::move(p)}, timeout, [n](result<wire::message>& reply) -> result<std::vector<result<produced>>> {
          auto answered = mq_reply<wire::mq_produced>(reply);
          if (!answered) return std::move(answered).error();
          if (answered->results.size() != n) {
            return error{errc::protocol, "a produce of " + std::to_string(n) + " messages answered " +
                                             std::to_string(answered->results.size())};
          }
          std::vector<result<produced>> each;
          each.reserve(n);
          for (auto& r : answered->results) {
            if (r.code != errc::ok) {
              each.emplace_back(error{r.code, r.message});
            } else {
              each.emplace_back(produced{r.partition, r.offset, r.duplicate});
            }
          }
          return each;
        });
    if (done) {
      for (auto& r : *done) out.push_back(std::move(r));
    } else {
      for (std::size_t i = 0; i < n; ++i) out.emplace_back(done.error());
    }
  }
  // Not appended: nothing will name the payload (the master frees a
  // duplicate's itself). After a timeout the append may still have
  // happened, so the payload stays. A topic gone (or made again) is
  // learned afresh.
  bool forget = false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] || out[i].code() == errc::timeout) continue;
    (void)client_->remove(keys[i], call_options{timeout});
    forget = forget || out[i].code() == errc::not_found;
  }
  if (forget) {
    std::lock_guard lock{topics_->mutex};
    topics_->known.erase(std::string{topic});
  }
  return out;
}

result<produced> mq::produce(std::string_view topic, std::string_view text, const produce_options& options) {
  return produce(topic, std::as_bytes(std::span{text.data(), text.size()}), options);
}

result<produced> mq::produce(std::string_view topic, std::span<const std::byte> bytes,
                             const produce_options& options) {
  auto config = config_of(topic, options.timeout);
  if (!config) return std::move(config).error();
  if (auto ok = check_size(topic, *config, bytes.size()); !ok) return ok.error();
  auto key = payload_key(topic);
  if (auto stored = client_->put(key, bytes, payload_put(*config, options.timeout)); !stored) {
    return std::move(stored).error();
  }
  auto item = item_of(options);
  std::uint64_t size = bytes.size();
  return std::move(append(topic, {std::move(key)}, {&item, 1}, {&size, 1}, options.timeout).front());
}

result<produced> mq::produce(std::string_view topic, const dict_builder& dict, const produce_options& options) {
  auto room = reserve(topic, dict.encoded_size(), options.timeout);
  if (!room) return std::move(room).error();
  if (auto ok = dict.encode_into(room->bytes()); !ok) return ok.error();
  return produce(std::move(*room), options);
}

result<mq_writable> mq::reserve(std::string_view topic, std::uint64_t size, std::chrono::milliseconds timeout) {
  auto config = config_of(topic, timeout);
  if (!config) return std::move(config).error();
  if (auto ok = check_size(topic, *config, size); !ok) return ok.error();
  auto key = payload_key(topic);
  auto room = client_->reserve(key, size, payload_put(*config, timeout));
  if (!room) return std::move(room).error();
  return mq_writable{std::string{topic}, std::move(key), std::move(*room)};
}

result<produced> mq::produce(mq_writable&& message, const produce_options& options) {
  auto taken = std::move(message);
  std::uint64_t size = taken.bytes().size();
  if (auto committed = taken.value_.commit(call_options{options.timeout}); !committed) {
    return std::move(committed).error();
  }
  auto item = item_of(options);
  return std::move(append(taken.topic_, {std::move(taken.payload_key_)}, {&item, 1}, {&size, 1}, options.timeout).front());
}

std::vector<result<produced>> mq::produce_batch(std::string_view topic, std::span<const mq_item> items,
                                                std::chrono::milliseconds timeout) {
  if (items.empty()) return {};
  auto config = config_of(topic, timeout);
  if (!config) return std::vector<result<produced>>(items.size(), result<produced>{config.error()});
  // The payloads first (pipelined when one copy each), then one append
  // for those stored; each item's result in its place.
  std::vector<result<produced>> out(items.size(), result<produced>{produced{}});
  std::vector<std::size_t> sized;  // items within the topic's largest message
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto ok = check_size(topic, *config, items[i].bytes.size()); !ok) {
      out[i] = ok.error();
    } else {
      sized.push_back(i);
    }
  }
  std::vector<std::string> all_keys;
  all_keys.reserve(sized.size());
  for (std::size_t j = 0; j < sized.size(); ++j) all_keys.push_back(payload_key(topic));
  std::vector<result<std::uint64_t>> puts;
  if (config->payload_replicas == 1) {
    std::vector<std::pair<std::string_view, std::span<const std::byte>>> batch;
    batch.reserve(sized.size());
    for (std::size_t j = 0; j < sized.size(); ++j) batch.emplace_back(all_keys[j], items[sized[j]].bytes);
    puts = client_->put_batch(batch, call_options{timeout});
  } else {
    for (std::size_t j = 0; j < sized.size(); ++j) {
      puts.push_back(client_->put(all_keys[j], items[sized[j]].bytes, payload_put(*config, timeout)));
    }
  }
  std::vector<std::size_t> stored;
  std::vector<std::string> keys;
  std::vector<std::uint64_t> sizes;
  std::vector<mq_item> appended;
  for (std::size_t j = 0; j < sized.size(); ++j) {
    auto i = sized[j];
    if (!puts[j]) {
      out[i] = puts[j].error();
      continue;
    }
    stored.push_back(i);
    keys.push_back(std::move(all_keys[j]));
    sizes.push_back(items[i].bytes.size());
    appended.push_back(mq_item{{}, items[i].key, items[i].message_id, items[i].partition});
  }
  if (stored.empty()) return out;
  auto results = append(topic, std::move(keys), appended, sizes, timeout);
  for (std::size_t j = 0; j < stored.size(); ++j) out[stored[j]] = std::move(results[j]);
  return out;
}

result<mq_consumer> mq::subscribe(std::string_view group, std::vector<std::string> topics,
                                  const consumer_options& options) {
  auto st = std::make_unique<mq_consumer::impl>();
  st->owner = client_;
  st->c = client_->impl_.get();
  st->group = std::string{group};
  st->options = options;
  st->join.group = st->group;
  st->join.config.topics = std::move(topics);
  st->join.config.ack_timeout_ms = options.ack_timeout.count();
  st->join.config.max_deliveries = options.max_deliveries;
  st->join.config.prefetch = options.prefetch;
  st->join.config.start = options.from_latest ? wire::mq_start_at::latest : wire::mq_start_at::earliest;
  st->join.lease_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(options.lease.count(), 1));
  if (auto ok = st->do_join(); !ok) return std::move(ok).error();
  return mq_consumer{std::move(st)};
}

result<std::vector<partition_lag>> mq::lag(std::string_view group, std::chrono::milliseconds timeout) {
  return ask_mq<std::vector<partition_lag>>(
      *client_->impl_, wire::mq{wire::mq_group_status{std::string{group}}}, timeout,
      [](result<wire::message>& reply) -> result<std::vector<partition_lag>> {
        auto status = mq_reply<wire::mq_group_status_reply>(reply);
        if (!status) return std::move(status).error();
        std::vector<partition_lag> out;
        for (auto& p : status->partitions) {
          out.push_back({p.group, p.partition.topic, p.partition.partition,
                         p.member == 0 ? std::string{} : node_id{p.member}.to_string(), p.committed, p.next,
                         p.in_flight, p.lag_messages, p.lag_bytes});
        }
        return out;
      });
}

result<void> mq::delete_group(std::string_view group, std::chrono::milliseconds timeout) {
  return ask_mq<void>(*client_->impl_, wire::mq{wire::mq_delete_group{std::string{group}}}, timeout, ok_reply);
}

}  // namespace sluice
