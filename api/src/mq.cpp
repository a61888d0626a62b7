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

#include "api/src/kv_calls.hpp"
#include "sluice/client.hpp"

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

std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 0xF];
  return out;
}

/// The reply's mq body of kind T, or the error it carried.
template <class T>
result<T> mq_reply(result<wire::message>& reply) {
  auto body = reply_body<wire::mq>(reply);
  if (!body) return std::move(body).error();
  if (auto* x = std::get_if<T>(&body->body)) return std::move(*x);
  return error{errc::protocol, "unexpected reply: " + std::string{wire::mq_body_name(body->body)}};
}

result<void> ok_reply(result<wire::message>& reply) {
  auto body = reply_body<wire::ok_reply>(reply);
  if (!body) return std::move(body).error();
  return {};
}

/// Asks through the client node and waits for the answer.
template <class T, class Convert>
result<T> ask_mq(client::impl& c, wire::body request, std::chrono::milliseconds timeout, Convert convert) {
  auto [done, future] = promise_callback<T>();
  call<T>(c, std::move(request), {}, call_options{timeout}, std::move(convert), std::move(done));
  return wait_for(std::move(future), effective(c, timeout));
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
  return o;
}

}  // namespace

// --- the consumer --------------------------------------------------------

struct mq_consumer::impl {
  client* owner = nullptr;
  client::impl* c = nullptr;
  std::string group;
  wire::mq_join join;
  consumer_options options;
  bool joined = false;

  result<void> do_join() {
    auto reply = ask_mq<wire::mq_joined>(*c, wire::mq{join}, options.timeout, mq_reply<wire::mq_joined>);
    if (!reply) return std::move(reply).error();
    joined = true;
    return {};
  }

  template <class T, class Convert>
  result<T> ask(wire::mq_body body, std::chrono::milliseconds timeout, Convert convert) {
    return ask_mq<T>(*c, wire::mq{std::move(body)}, timeout, std::move(convert));
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
  auto& st = *impl_;
  if (!st.joined) {
    if (auto ok = st.do_join(); !ok) return std::move(ok).error();
  }
  wire::mq_poll p{st.group, 0, static_cast<std::uint32_t>(std::min<std::size_t>(options.max_messages, 1024)),
                  options.max_bytes, static_cast<std::uint64_t>(std::max<std::int64_t>(options.wait.count(), 0))};
  auto timeout = options.wait + effective(*st.c, st.options.timeout);
  auto convert = mq_reply<wire::mq_polled>;
  auto polled = st.ask<wire::mq_polled>(p, timeout, convert);
  if (!polled && polled.code() == errc::not_found && polled.error().message().find("join first") != std::string::npos) {
    // The master forgot the member (it restarted, or the lease lapsed):
    // join again, then poll.
    if (auto ok = st.do_join(); !ok) return std::move(ok).error();
    polled = st.ask<wire::mq_polled>(p, timeout, convert);
  }
  if (!polled) return std::move(polled).error();
  std::vector<std::string_view> keys;
  keys.reserve(polled->deliveries.size());
  for (auto& d : polled->deliveries) keys.push_back(d.payload);
  auto values = st.owner->get_batch(keys, call_options{st.options.timeout});
  std::vector<mq_message> out;
  out.reserve(polled->deliveries.size());
  for (std::size_t i = 0; i < polled->deliveries.size(); ++i) {
    auto& d = polled->deliveries[i];
    out.push_back(mq_message{std::move(d.partition.topic), d.partition.partition, d.offset, d.delivery_count,
                             std::move(values[i]), d.generation});
  }
  return out;
}

result<void> mq_consumer::ack(const mq_message& m) {
  wire::mq_settle s;
  s.kind = wire::mq_settle_kind::ack;
  s.partition = {m.topic, m.partition};
  s.offset = m.offset;
  s.generation = m.generation;
  auto n = impl_->settle(std::move(s));
  if (!n) return std::move(n).error();
  return {};
}

result<std::uint64_t> mq_consumer::ack_upto(std::string_view topic, std::uint32_t partition, std::uint64_t offset) {
  wire::mq_settle s;
  s.kind = wire::mq_settle_kind::ack_upto;
  s.partition = {std::string{topic}, partition};
  s.offset = offset;
  return impl_->settle(std::move(s));
}

result<void> mq_consumer::nack(const mq_message& m, std::chrono::milliseconds delay) {
  wire::mq_settle s;
  s.kind = wire::mq_settle_kind::nack;
  s.partition = {m.topic, m.partition};
  s.offset = m.offset;
  s.generation = m.generation;
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
  if (!impl_ || !impl_->joined) return {};
  impl_->joined = false;
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

result<produced> mq::produce(std::string_view topic, std::string_view text, const produce_options& options) {
  return produce(topic, std::as_bytes(std::span{text.data(), text.size()}), options);
}

result<produced> mq::produce(std::string_view topic, std::span<const std::byte> bytes,
                             const produce_options& options) {
  auto& c = *client_->impl_;
  // The payload's copies: as many as the topic asks for, learned once.
  // (A topic deleted and made again with more replicas is seen by a new mq.)
  auto key = "~mq/" + std::string{topic} + "/" + hex(producer_) + "/" + hex(process_nonce()) + "-" +
             hex(payload_seq.fetch_add(1, std::memory_order_relaxed));
  std::optional<topic_options> config;
  {
    std::lock_guard lock{topics_->mutex};
    if (auto it = topics_->known.find(topic); it != topics_->known.end()) config = it->second;
  }
  if (!config) {
    auto listed = topics(options.timeout);
    if (!listed) return std::move(listed).error();
    std::lock_guard lock{topics_->mutex};
    topics_->known.clear();
    for (auto& t : *listed) topics_->known.emplace(t.name, t.options);
    auto it = topics_->known.find(topic);
    if (it == topics_->known.end()) return fail(errc::not_found, "no topic '" + std::string{topic} + "'");
    config = it->second;
  }
  if (bytes.size() > config->max_message_bytes) {
    return fail(errc::invalid_argument, "the message is " + std::to_string(bytes.size()) + " bytes; topic '" +
                                            std::string{topic} + "' takes at most " +
                                            std::to_string(config->max_message_bytes));
  }
  auto replicas = config->payload_replicas;
  put_options put;
  put.timeout = options.timeout;
  put.replicas = replicas;
  if (auto stored = client_->put(key, bytes, put); !stored) return std::move(stored).error();
  wire::mq_message m{key, bytes.size(), options.message_id, options.key, options.partition.has_value(),
                     options.partition.value_or(0)};
  wire::mq_produce p{std::string{topic}, producer_, {std::move(m)}};
  auto out = ask_mq<produced>(c, wire::mq{std::move(p)}, options.timeout,
                              [](result<wire::message>& reply) -> result<produced> {
                                auto done = mq_reply<wire::mq_produced>(reply);
                                if (!done) return std::move(done).error();
                                if (done->results.size() != 1) {
                                  return error{errc::protocol, "a produce of one message answered " +
                                                                   std::to_string(done->results.size())};
                                }
                                auto& r = done->results.front();
                                if (r.code != errc::ok) return error{r.code, r.message};
                                return produced{r.partition, r.offset, r.duplicate};
                              });
  // Not appended: nothing will name the payload (the master frees a
  // duplicate's itself). A topic gone (or made again) is learned afresh.
  if (!out && out.code() != errc::timeout) (void)client_->remove(key, call_options{options.timeout});
  if (!out && out.code() == errc::not_found) {
    std::lock_guard lock{topics_->mutex};
    topics_->known.erase(std::string{topic});
  }
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
