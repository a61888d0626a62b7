#include "sluice/client.hpp"

#include <cstring>

#include <caf/send.hpp>

#include "actors/client/client.hpp"
#include "sluice/dict.hpp"
#include "transports/shm/shm_client.hpp"
#include "api/src/client_impl.hpp"
#include "runtime/config/load.hpp"
#include "runtime/keys.hpp"

namespace sluice {
namespace {

/// Values at least this large are put by reserving pool memory and
/// copying once into it, rather than through the request ring.
constexpr std::size_t copy_once_bytes_min = 256 * 1024;

/// A synchronous call waits this much longer than its own deadline before
/// giving up on the node, so the node's timeout error normally wins.
constexpr std::chrono::milliseconds sync_slack{1000};

template <class T>
using callback = std::function<void(result<T>)>;

template <class T, class Convert>
void call(client::impl& c, wire::body request, shared_bytes payload, call_options options,
          Convert convert, callback<T> done) {
  auto timeout = options.timeout.count() > 0 ? options.timeout : c.options.timeout;
  api_call msg;
  msg.request = std::move(request);
  msg.payload = std::move(payload);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  msg.done = [convert = std::move(convert), done = std::move(done)](result<wire::message> reply) {
    done(convert(reply));
  };
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

template <class T>
result<T> wait_for(std::future<result<T>> future, std::chrono::milliseconds timeout) {
  if (future.wait_for(timeout + sync_slack) != std::future_status::ready) {
    return fail(errc::timeout, "no answer from the client node within " +
                                   std::to_string((timeout + sync_slack).count()) + " ms");
  }
  return future.get();
}

template <class T>
std::pair<callback<T>, std::future<result<T>>> promise_callback() {
  auto promise = std::make_shared<std::promise<result<T>>>();
  auto future = promise->get_future();
  return {[promise](result<T> r) { promise->set_value(std::move(r)); }, std::move(future)};
}

std::chrono::milliseconds effective(const client::impl& c, call_options o) {
  return o.timeout.count() > 0 ? o.timeout : c.options.timeout;
}

/// Starts `start(key, done)` for every key at once, then waits for each;
/// one result per key, in order.
template <class T, class Start>
std::vector<result<T>> run_batch(std::span<const std::string_view> keys, std::chrono::milliseconds timeout,
                                 Start start) {
  std::vector<std::future<result<T>>> pending;
  pending.reserve(keys.size());
  for (auto key : keys) {
    auto [done, future] = promise_callback<T>();
    start(key, std::move(done));
    pending.push_back(std::move(future));
  }
  std::vector<result<T>> out;
  out.reserve(keys.size());
  for (auto& f : pending) out.push_back(wait_for(std::move(f), timeout));
  return out;
}

result<wire::put_condition> condition_of(const put_options& o) {
  if (o.if_absent && o.if_version != 0) {
    return fail(errc::invalid_argument, "a put may require the key absent or at a version, not both");
  }
  if (o.ttl.count() < 0) return fail(errc::invalid_argument, "a negative time to live");
  if (o.replicas < 1 || o.replicas > 255) return fail(errc::invalid_argument, "replicas must be from 1 to 255");
  return wire::put_condition{o.if_absent, o.if_version};
}

std::uint64_t ttl_of(const put_options& o) { return static_cast<std::uint64_t>(std::max<std::int64_t>(o.ttl.count(), 0)); }

// --- reply conversions ---------------------------------------------------

result<std::uint64_t> to_version(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_put_reply>(reply);
  if (!body) return std::move(body).error();
  return body->version;
}

result<value> to_value(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_get_reply>(reply);
  if (!body) return std::move(body).error();
  const auto& bytes = reply->payload;
  return value{bytes.owner(), bytes.span(), body->version};
}

result<bool> to_removed(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_remove_reply>(reply);
  if (!body) return std::move(body).error();
  return body->existed;
}

result<bool> to_exists(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_exists_reply>(reply);
  if (!body) return std::move(body).error();
  return body->exists;
}

result<cluster_status> to_status(result<wire::message>& reply) {
  auto body = reply_body<wire::cluster_status_reply>(reply);
  if (!body) return std::move(body).error();
  cluster_status out;
  out.master_id = body->master.to_string();
  out.object_count = body->object_count;
  for (auto& m : body->members) {
    member_info info;
    info.id = m.id.to_string();
    info.role = std::string{to_string(m.member_role)};
    info.name = m.name;
    info.address = m.address;
    info.up = m.state == wire::member_state::up;
    info.capacity_bytes = m.capacity_bytes;
    info.used_bytes = m.used_bytes;
    info.object_count = m.object_count;
    info.evictions = m.evictions;
    info.stored_bytes = m.stored_bytes;
    info.stored_objects = m.stored_objects;
    info.home_slots = m.home_slots;
    info.own_commits = m.own_commits;
    info.since_heartbeat = std::chrono::microseconds{m.last_heartbeat_age_us};
    for (auto& l : m.links) {
      link_info link{l.peer.to_string(), l.peer_name, l.active, l.via.value == 0 ? "" : l.via.to_string(), {}};
      for (auto& p : l.paths) {
        link.paths.push_back(path_info{p.kind, p.health, p.failures, std::chrono::microseconds{p.retry_in_us},
                                       p.last_error, p.bytes});
      }
      info.links.push_back(std::move(link));
    }
    out.members.push_back(std::move(info));
  }
  return out;
}

result<void> to_pong(result<wire::message>& reply) {
  auto body = reply_body<wire::ok_reply>(reply);
  if (!body) return std::move(body).error();
  return {};
}

/// Where to look for the owner at `address`, best first. An owner serves
/// local clients on the abstract Unix socket "@sluice-" + its TCP address
/// (unless configured otherwise): reaching it there means the owner runs
/// on this host.
std::vector<std::string> owner_addresses(const std::string& address, client_transport choice) {
  bool plain_tcp = address.find("://") == std::string::npos;
  std::string shm = address.starts_with("shm://") ? address : "shm://@sluice-" + address;
  switch (choice) {
    case client_transport::tcp: return {address};
    case client_transport::shared_memory: return {shm};
    case client_transport::automatic: break;
  }
  if (plain_tcp) return {shm, address};
  return {address};
}

}  // namespace

result<client_options> load_client_options(const std::string& config_file) {
  auto cfg = load_config_file(config_file);
  if (!cfg) return std::move(cfg).error();
  client_options out;
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(cfg->client.request_timeout);
  out.timeout = std::max(timeout, std::chrono::milliseconds{1});
  out.connect_timeout = out.timeout;
  out.keepalive = std::chrono::duration_cast<std::chrono::milliseconds>(cfg->client.keepalive);
  return out;
}

result<std::unique_ptr<client>> client::connect(const std::string& address, client_options options) {
  return impl::connect_with(address, std::move(options), nullptr);
}

result<std::unique_ptr<client>> client::impl::connect_with(const std::string& address,
                                                           client_options options,
                                                           std::shared_ptr<transport::inproc_hub> hub) {
  node_config cfg;
  cfg.node.name = options.name;
  cfg.node.threads = 1;
  cfg.client.keepalive = std::chrono::duration_cast<std::chrono::microseconds>(options.keepalive);
  auto host = node_host::start_client(cfg, owner_addresses(address, options.transport), {hub.get(), ""});
  if (!host) return std::move(host).error();
  auto state = std::make_unique<impl>();
  state->hub = std::move(hub);
  auto addresses = owner_addresses(address, options.transport);
  if (addresses.front().starts_with("shm://")) state->shm_address = addresses.front().substr(6);
  state->host = std::move(*host);
  state->options = std::move(options);
  state->address = address;
  auto [done, future] = promise_callback<void>();
  call<void>(*state, wire::ping{}, {}, call_options{state->options.connect_timeout}, to_pong,
             std::move(done));
  auto pong = wait_for(std::move(future), state->options.connect_timeout);
  if (!pong) {
    return fail(pong.code() == errc::timeout ? errc::unavailable : pong.code(),
                "cannot reach a Sluice node at " + address + ": " + pong.error().message());
  }
  return std::make_unique<client>(std::move(state));
}

client::client(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
client::~client() = default;

const std::string& client::address() const noexcept { return impl_->address; }

void client::put_async(std::string_view key, std::span<const std::byte> bytes,
                       std::function<void(result<std::uint64_t>)> done, call_options options) {
  if (auto ok = check_key(key); !ok) return done(ok.error());
  // One copy: the caller's buffer may be gone before the bytes are sent.
  call<std::uint64_t>(*impl_, wire::kv_put{std::string{key}, {}, 0, 1, ""}, shared_bytes::copy_of(bytes),
                      options, to_version, std::move(done));
}

void client::get_async(std::string_view key, std::function<void(result<value>)> done,
                       call_options options) {
  if (auto ok = check_key(key); !ok) return done(ok.error());
  call<value>(*impl_, wire::kv_get{std::string{key}}, {}, options, to_value, std::move(done));
}

void client::remove_async(std::string_view key, std::function<void(result<bool>)> done,
                          call_options options) {
  if (auto ok = check_key(key); !ok) return done(ok.error());
  call<bool>(*impl_, wire::kv_remove{std::string{key}, 0}, {}, options, to_removed, std::move(done));
}

void client::exists_async(std::string_view key, std::function<void(result<bool>)> done,
                          call_options options) {
  if (auto ok = check_key(key); !ok) return done(ok.error());
  call<bool>(*impl_, wire::kv_exists{std::string{key}}, {}, options, to_exists, std::move(done));
}

std::future<result<std::uint64_t>> client::put_async(std::string_view key,
                                                     std::span<const std::byte> bytes,
                                                     call_options options) {
  auto [done, future] = promise_callback<std::uint64_t>();
  put_async(key, bytes, std::move(done), options);
  return std::move(future);
}

std::future<result<value>> client::get_async(std::string_view key, call_options options) {
  auto [done, future] = promise_callback<value>();
  get_async(key, std::move(done), options);
  return std::move(future);
}

result<std::uint64_t> client::put(std::string_view key, std::span<const std::byte> bytes,
                                  call_options options) {
  return put(key, bytes, put_options{.timeout = options.timeout});
}

result<std::uint64_t> client::put(std::string_view key, std::span<const std::byte> bytes,
                                  const put_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  auto condition = condition_of(o);
  if (!condition) return std::move(condition).error();
  call_options options{o.timeout};
  if (bytes.size() >= copy_once_bytes_min && !impl_->shm_address.empty()) {
    // Large: one copy, into the pool; two round trips cost less than
    // three copies of the value would.
    auto w = reserve(key, bytes.size(), o);
    if (w && w->bytes().size() == bytes.size()) {
      std::memcpy(w->bytes().data(), bytes.data(), bytes.size());
      return w->commit(options);
    }
  }
  // The caller waits anyway: the request is sent from its own thread, and
  // the bytes go straight from its buffer into the ring (one copy).
  shared_bytes payload{nullptr, bytes};
  wire::kv_put request{std::string{key}, *condition, ttl_of(o), o.replicas, o.owner};
  if (auto r = direct_call(*impl_, request, payload, effective(*impl_, options))) return to_version(*r);
  auto [done, future] = promise_callback<std::uint64_t>();
  call<std::uint64_t>(*impl_, std::move(request), shared_bytes::copy_of(bytes), options, to_version,
                      std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<std::uint64_t> client::put(std::string_view key, std::string_view text, call_options options) {
  return put(key, as_bytes(text), options);
}

result<std::uint64_t> client::put(std::string_view key, std::string_view text, const put_options& options) {
  return put(key, as_bytes(text), options);
}

result<value> client::get(std::string_view key, call_options options) {
  if (auto ok = check_key(key); !ok) return ok.error();
  if (auto r = direct_call(*impl_, wire::kv_get{std::string{key}}, {}, effective(*impl_, options))) {
    return to_value(*r);
  }
  return wait_for(get_async(key, options), effective(*impl_, options));
}

result<bool> client::remove(std::string_view key, call_options options) {
  return remove(key, remove_options{.timeout = options.timeout});
}

result<bool> client::remove(std::string_view key, const remove_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  call_options options{o.timeout};
  wire::kv_remove request{std::string{key}, o.if_version};
  if (auto r = direct_call(*impl_, request, {}, effective(*impl_, options))) return to_removed(*r);
  auto [done, future] = promise_callback<bool>();
  call<bool>(*impl_, std::move(request), {}, options, to_removed, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<bool> client::exists(std::string_view key, call_options options) {
  if (auto ok = check_key(key); !ok) return ok.error();
  if (auto r = direct_call(*impl_, wire::kv_exists{std::string{key}}, {}, effective(*impl_, options))) {
    return to_exists(*r);
  }
  auto [done, future] = promise_callback<bool>();
  exists_async(key, std::move(done), options);
  return wait_for(std::move(future), effective(*impl_, options));
}

std::vector<result<bool>> client::remove_batch(std::span<const std::string_view> keys, call_options options) {
  return run_batch<bool>(keys, effective(*impl_, options), [&](std::string_view key, callback<bool> done) {
    remove_async(key, std::move(done), options);
  });
}

std::vector<result<bool>> client::exists_batch(std::span<const std::string_view> keys, call_options options) {
  return run_batch<bool>(keys, effective(*impl_, options), [&](std::string_view key, callback<bool> done) {
    exists_async(key, std::move(done), options);
  });
}

result<key_page> client::list(std::string_view prefix, const list_options& o) {
  if (prefix.size() > max_key_bytes) return fail(errc::invalid_argument, "the prefix is longer than any key may be");
  call_options options{o.timeout};
  auto convert = [](result<wire::message>& reply) -> result<key_page> {
    auto body = reply_body<wire::list_keys_reply>(reply);
    if (!body) return std::move(body).error();
    key_page out;
    out.more = body->more;
    out.keys.reserve(body->keys.size());
    for (auto& k : body->keys) out.keys.push_back(key_info{std::move(k.key), k.version, k.size});
    return out;
  };
  auto [done, future] = promise_callback<key_page>();
  call<key_page>(*impl_, wire::list_keys{std::string{prefix}, o.start_after, o.limit}, {}, options, convert,
                 std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<std::uint64_t> client::count(std::string_view prefix, call_options options) {
  if (prefix.size() > max_key_bytes) return fail(errc::invalid_argument, "the prefix is longer than any key may be");
  auto convert = [](result<wire::message>& reply) -> result<std::uint64_t> {
    auto body = reply_body<wire::count_keys_reply>(reply);
    if (!body) return std::move(body).error();
    return body->count;
  };
  auto [done, future] = promise_callback<std::uint64_t>();
  call<std::uint64_t>(*impl_, wire::count_keys{std::string{prefix}}, {}, options, convert, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<std::uint64_t> client::pin(std::string_view key, const pin_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  if (o.ttl.count() < 0) return fail(errc::invalid_argument, "a negative pin time");
  call_options options{o.timeout};
  auto convert = [](result<wire::message>& reply) -> result<std::uint64_t> {
    auto body = reply_body<wire::pin_reply>(reply);
    if (!body) return std::move(body).error();
    return body->version;
  };
  auto [done, future] = promise_callback<std::uint64_t>();
  wire::pin request{std::string{key}, static_cast<std::uint64_t>(o.ttl.count()), o.detached ? 0U : 1U};
  call<std::uint64_t>(*impl_, std::move(request), {}, options, convert, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<bool> client::unpin(std::string_view key, const pin_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  call_options options{o.timeout};
  auto convert = [](result<wire::message>& reply) -> result<bool> {
    auto body = reply_body<wire::unpin_reply>(reply);
    if (!body) return std::move(body).error();
    return body->was_pinned;
  };
  auto [done, future] = promise_callback<bool>();
  call<bool>(*impl_, wire::unpin{std::string{key}, o.detached ? 0U : 1U}, {}, options, convert, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<cluster_status> client::status(call_options options) {
  auto [done, future] = promise_callback<cluster_status>();
  call<cluster_status>(*impl_, wire::cluster_status{}, {}, options, to_status, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

// --- writing in place --------------------------------------------------------

struct writable_value::impl {
  client::impl* owner = nullptr;  // REQUIRES: the client outlives this value
  std::string key;
  wire::put_condition condition;  // checked at commit
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
  std::span<std::byte> bytes;
  std::shared_ptr<void> keep;                // the mapping, or the local buffer
  std::optional<std::uint64_t> reservation;  // set when bytes are pool memory
  bool finished = false;
};

writable_value::writable_value(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
writable_value::writable_value(writable_value&&) noexcept = default;
writable_value& writable_value::operator=(writable_value&& other) noexcept {
  if (this != &other) {
    abort();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
writable_value::~writable_value() { abort(); }

std::span<std::byte> writable_value::bytes() const noexcept { return impl_ ? impl_->bytes : std::span<std::byte>{}; }

void writable_value::abort() {
  if (!impl_ || impl_->finished) return;
  impl_->finished = true;
  if (impl_->reservation) {
    api_call msg;
    msg.request = wire::kv_abort{*impl_->reservation};
    msg.notify = true;
    caf::anon_send(impl_->owner->host->actor(), api_atom::value, std::move(msg));
  }
}

result<std::uint64_t> writable_value::commit(call_options options) {
  if (!impl_ || impl_->finished) return fail(errc::invalid_argument, "this value was committed or aborted already");
  impl_->finished = true;
  auto& c = *impl_->owner;
  auto [done, future] = promise_callback<std::uint64_t>();
  if (impl_->reservation) {
    call<std::uint64_t>(c, wire::kv_commit{*impl_->reservation}, {}, options, to_version, std::move(done));
  } else {
    // A local buffer: it goes as the put's payload, without a copy.
    shared_bytes payload{impl_->keep, impl_->bytes};
    call<std::uint64_t>(c, wire::kv_put{impl_->key, impl_->condition, impl_->ttl_ms, impl_->replicas, impl_->prefer_owner}, std::move(payload), options, to_version,
                        std::move(done));
  }
  return wait_for(std::move(future), effective(c, options));
}

namespace {

result<writable_value> local_buffer(client::impl& c, std::string_view key, std::uint64_t size,
                                    wire::put_condition condition, std::uint64_t ttl_ms, std::uint32_t replicas,
                                    std::string prefer_owner) {
  auto buffer = std::make_shared<byte_buffer>(byte_buffer::allocate(size));
  auto state = std::make_unique<writable_value::impl>();
  state->owner = &c;
  state->key = std::string{key};
  state->condition = condition;
  state->ttl_ms = ttl_ms;
  state->replicas = replicas;
  state->prefer_owner = std::move(prefer_owner);
  state->bytes = buffer->span();
  state->keep = std::move(buffer);
  return writable_value{std::move(state)};
}

result<writable_value> in_pool(client::impl& c, std::string_view key, const wire::kv_reserve_reply& r) {
  auto mapped = c.host->shm()->map_region(region{r.where.segment, r.where.offset, r.where.length});
  if (!mapped) {
    api_call msg;
    msg.request = wire::kv_abort{r.reservation};
    msg.notify = true;
    caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
    return fail(errc::unavailable, "the owner's pool is no longer mapped (the link went down)");
  }
  auto state = std::make_unique<writable_value::impl>();
  state->owner = &c;
  state->key = std::string{key};
  state->bytes = mapped->bytes;
  state->keep = std::move(mapped->keep);
  state->reservation = r.reservation;
  return writable_value{std::move(state)};
}

}  // namespace

result<writable_value> client::reserve(std::string_view key, std::uint64_t size, call_options options) {
  return reserve(key, size, put_options{.timeout = options.timeout});
}

result<writable_value> client::reserve(std::string_view key, std::uint64_t size, const put_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  auto condition = condition_of(o);
  if (!condition) return std::move(condition).error();
  call_options options{o.timeout};
  auto* shm = impl_->host->shm();
  if (shm == nullptr || !shm->connected()) return local_buffer(*impl_, key, size, *condition, ttl_of(o), o.replicas, o.owner);
  auto [done, future] = promise_callback<wire::kv_reserve_reply>();
  auto convert = [](result<wire::message>& reply) { return reply_body<wire::kv_reserve_reply>(reply); };
  call<wire::kv_reserve_reply>(*impl_, wire::kv_reserve{std::string{key}, size, *condition, ttl_of(o), o.replicas, o.owner}, {}, options, convert,
                               std::move(done));
  auto reserved = wait_for(std::move(future), effective(*impl_, options));
  if (!reserved) return std::move(reserved).error();
  return in_pool(*impl_, key, *reserved);
}

result<std::uint64_t> client::put(std::string_view key, const dict_builder& dict, call_options options) {
  auto w = reserve(key, dict.encoded_size(), options);
  if (!w) return std::move(w).error();
  if (auto ok = dict.encode_into(w->bytes()); !ok) return ok.error();
  return w->commit(options);
}

std::vector<result<std::uint64_t>> client::put_batch(
    std::span<const std::pair<std::string_view, std::span<const std::byte>>> items, call_options options) {
  std::vector<std::future<result<std::uint64_t>>> pending;
  pending.reserve(items.size());
  for (auto& [key, bytes] : items) pending.push_back(put_async(key, bytes, options));
  std::vector<result<std::uint64_t>> out;
  out.reserve(items.size());
  for (auto& f : pending) out.push_back(wait_for(std::move(f), effective(*impl_, options)));
  return out;
}

result<std::size_t> client::get_into(std::string_view key, std::span<std::byte> out, call_options options) {
  auto v = get(key, options);
  if (!v) return std::move(v).error();
  if (v->size() > out.size()) {
    return fail(errc::invalid_argument, "the value is " + std::to_string(v->size()) +
                                            " bytes; the buffer holds " + std::to_string(out.size()));
  }
  if (!v->empty()) std::memcpy(out.data(), v->data(), v->size());
  return v->size();
}

std::vector<result<value>> client::get_batch(std::span<const std::string_view> keys, call_options options) {
  return run_batch<value>(keys, effective(*impl_, options), [&](std::string_view key, callback<value> done) {
    get_async(key, std::move(done), options);
  });
}

}  // namespace sluice
