// sluice::writable_value: a value written in place — in the owner's pool
// when the client shares its host (reserve, then commit), else in a
// buffer of the client's own that the commit sends as a put's payload.
#include "api/src/kv_calls.hpp"
#include "runtime/keys.hpp"
#include "sluice/dict.hpp"
#include "transports/shm/shm_client.hpp"

namespace sluice {

struct writable_value::impl {
  client::impl* owner = nullptr;  // REQUIRES: the client outlives this value
  std::string key;
  wire::put_condition condition;  // checked at commit
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
  std::uint32_t min_replicas = 0;
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
  if (!impl_->reservation) return;
  auto& c = *impl_->owner;
  // On the path the reservation came by, and answered: a reserve that
  // follows finds the room back.
  wire::kv_abort request{*impl_->reservation};
  if (direct_call(c, request, {}, c.options.timeout)) return;
  tell_node(c, request);
}

result<std::uint64_t> writable_value::commit(call_options options) {
  auto done = commit_with_copies(options);
  if (!done) return std::move(done).error();
  return done->version;
}

result<put_result> writable_value::commit_with_copies(call_options options) {
  if (!impl_ || impl_->finished) return fail(errc::invalid_argument, "this value was committed or aborted already");
  impl_->finished = true;
  auto& c = *impl_->owner;
  if (impl_->reservation) {
    // On the calling thread's own channel when it has one: any link of
    // this client may commit what another one reserved.
    auto reply = ask(c, wire::kv_commit{*impl_->reservation}, {}, effective(c, options));
    return to_put_result(reply);
  }
  // A local buffer: it goes as the put's payload, without a copy.
  auto [done, future] = promise_callback<put_result>();
  shared_bytes payload{impl_->keep, impl_->bytes};
  wire::kv_put put{impl_->key, impl_->condition, impl_->ttl_ms, impl_->replicas, impl_->prefer_owner,
                   impl_->min_replicas};
  call<put_result>(c, std::move(put), std::move(payload), options, to_put_result, std::move(done));
  return wait_for(std::move(future), effective(c, options));
}

namespace {

result<writable_value> local_buffer(client::impl& c, std::string_view key, std::uint64_t size,
                                    wire::put_condition condition, std::uint64_t ttl_ms, std::uint32_t replicas,
                                    std::string prefer_owner, std::uint32_t min_replicas) {
  auto buffer = std::make_shared<byte_buffer>(byte_buffer::allocate(size));
  auto state = std::make_unique<writable_value::impl>();
  state->owner = &c;
  state->key = std::string{key};
  state->condition = condition;
  state->ttl_ms = ttl_ms;
  state->replicas = replicas;
  state->prefer_owner = std::move(prefer_owner);
  state->min_replicas = min_replicas;
  state->bytes = buffer->span();
  state->keep = std::move(buffer);
  return writable_value{std::move(state)};
}

result<writable_value> in_pool(client::impl& c, std::string_view key, const wire::kv_reserve_reply& r) {
  auto mapped = c.host->shm()->map_region(region{r.where.segment, r.where.offset, r.where.length});
  if (!mapped) {
    tell_node(c, wire::kv_abort{r.reservation});
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
  if (shm == nullptr || !shm->connected()) {
    return local_buffer(*impl_, key, size, *condition, ttl_of(o), o.replicas, o.owner, o.min_replicas);
  }
  // Straight to the owner on the calling thread's channel when it has one,
  // as gets and small puts go: no hand-off to the client node's threads.
  auto reply = ask(*impl_,
                   wire::kv_reserve{std::string{key}, size, *condition, ttl_of(o), o.replicas, o.owner, o.min_replicas},
                   {}, effective(*impl_, options));
  auto reserved = reply_body<wire::kv_reserve_reply>(reply);
  if (!reserved) return std::move(reserved).error();
  return in_pool(*impl_, key, *reserved);
}

result<std::uint64_t> client::put(std::string_view key, const dict_builder& dict, call_options options) {
  auto w = reserve(key, dict.encoded_size(), options);
  if (!w) return std::move(w).error();
  if (auto ok = dict.encode_into(w->bytes()); !ok) return ok.error();
  return w->commit(options);
}

}  // namespace sluice
