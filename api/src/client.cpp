#include "sluice/client.hpp"

#include <cstring>

#include "api/src/client_impl.hpp"
#include "api/src/kv_calls.hpp"
#include "api/src/calls.hpp"
#include "sluice/dict.hpp"
#include "runtime/config/load.hpp"
#include "runtime/keys.hpp"
#include "transports/tcp/tcp_address.hpp"

namespace sluice {
namespace {

/// Values at least this large are put by reserving pool memory and
/// copying once into it, rather than through the request ring.
constexpr std::size_t copy_once_bytes_min = 256 * 1024;

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

// --- reply conversions ---------------------------------------------------

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

/// The owner's TCP address among `addresses`, resolved once here (the
/// calling threads' own links never wait for the resolver), or empty.
std::string tcp_address_of(const std::vector<std::string>& addresses) {
  for (const auto& a : addresses) {
    auto plain = a.starts_with("tcp://") ? a.substr(6) : a;
    if (plain.find("://") != std::string::npos) continue;
    auto resolved = transport::resolve(plain);
    return resolved ? transport::format_address(resolved->address) : std::string{};
  }
  return {};
}

}  // namespace

result<wire::put_condition> condition_of(const put_options& o) {
  if (o.if_absent && o.if_version != 0) {
    return fail(errc::invalid_argument, "a put may require the key absent or at a version, not both");
  }
  if (o.ttl.count() < 0) return fail(errc::invalid_argument, "a negative time to live");
  if (o.replicas < 1 || o.replicas > 255) return fail(errc::invalid_argument, "replicas must be from 1 to 255");
  if (o.min_replicas > o.replicas) {
    return fail(errc::invalid_argument, "min_replicas (" + std::to_string(o.min_replicas) +
                                            ") must be from 1 to replicas (" + std::to_string(o.replicas) + ")");
  }
  return wire::put_condition{o.if_absent, o.if_version};
}

std::uint64_t ttl_of(const put_options& o) { return static_cast<std::uint64_t>(std::max<std::int64_t>(o.ttl.count(), 0)); }

result<std::uint64_t> to_version(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_put_reply>(reply);
  if (!body) return std::move(body).error();
  return body->version;
}

result<put_result> to_put_result(result<wire::message>& reply) {
  auto body = reply_body<wire::kv_put_reply>(reply);
  if (!body) return std::move(body).error();
  return put_result{body->version, body->copies};
}

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
  auto host = node_host::start_client(cfg, owner_addresses(address, options.transport), {hub.get(), "", nullptr});
  if (!host) return std::move(host).error();
  auto state = std::make_unique<impl>();
  state->hub = std::move(hub);
  auto addresses = owner_addresses(address, options.transport);
  if (addresses.front().starts_with("shm://")) state->shm_address = addresses.front().substr(6);
  state->tcp_address = tcp_address_of(addresses);
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
  auto done = put_with_copies(key, bytes, o);
  if (!done) return std::move(done).error();
  return done->version;
}

result<put_result> client::put_with_copies(std::string_view key, std::span<const std::byte> bytes,
                                           const put_options& o) {
  if (auto ok = check_key(key); !ok) return ok.error();
  auto condition = condition_of(o);
  if (!condition) return std::move(condition).error();
  call_options options{o.timeout};
  if (bytes.size() >= copy_once_bytes_min && !impl_->shm_address.empty()) {
    // Large: one copy, into the pool; two round trips cost less than
    // three copies of the value would.
    auto w = reserve(key, bytes.size(), o);
    // What the owner refuses to reserve it refuses to store: a value over
    // its max_value, no room, a condition that fails. (Sent inline it
    // would only overflow the ring.)
    if (!w && (w.code() == errc::invalid_argument || w.code() == errc::no_capacity || w.code() == errc::conflict)) {
      return std::move(w).error();
    }
    if (w && w->bytes().size() == bytes.size()) {
      std::memcpy(w->bytes().data(), bytes.data(), bytes.size());
      return w->commit_with_copies(options);
    }
  }
  // The caller waits anyway: the request is sent from its own thread, and
  // the bytes go straight from its buffer into the ring (one copy).
  shared_bytes payload{nullptr, bytes};
  wire::kv_put request{std::string{key}, *condition, ttl_of(o), o.replicas, o.owner, o.min_replicas};
  if (auto r = direct_call(*impl_, request, payload, effective(*impl_, options))) return to_put_result(*r);
  auto [done, future] = promise_callback<put_result>();
  call<put_result>(*impl_, std::move(request), shared_bytes::copy_of(bytes), options, to_put_result,
                   std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

result<put_result> client::put_with_copies(std::string_view key, std::string_view text, const put_options& options) {
  return put_with_copies(key, as_bytes(text), options);
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
