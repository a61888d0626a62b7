// The value types of sluice/rpc.hpp, and dicts to payloads and back.
#include "actors/common/endpoint.hpp"
#include "api/src/calls.hpp"
#include "api/src/rpc_state.hpp"
#include "runtime/rpc_limits.hpp"
#include "transports/shm/shm_client.hpp"

namespace sluice {

// --- requests and results -----------------------------------------------------

rpc_request::rpc_request(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
rpc_request::rpc_request(rpc_request&&) noexcept = default;
rpc_request& rpc_request::operator=(rpc_request&&) noexcept = default;
rpc_request::~rpc_request() = default;

const std::string& rpc_request::method() const noexcept { return impl_->method; }
const dict_view& rpc_request::args() const noexcept { return *impl_->args; }
const std::string& rpc_request::caller() const noexcept { return impl_->caller; }
std::chrono::steady_clock::time_point rpc_request::deadline() const noexcept { return impl_->deadline; }
bool rpc_request::cancelled() const noexcept {
  return impl_->cancelled->load(std::memory_order_acquire) || std::chrono::steady_clock::now() >= impl_->deadline;
}
std::optional<pool_location> rpc_request::args_location() const noexcept { return impl_->location; }

rpc_result::rpc_result(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
rpc_result::rpc_result(rpc_result&&) noexcept = default;
rpc_result& rpc_result::operator=(rpc_result&&) noexcept = default;
rpc_result::~rpc_result() = default;

const dict_view& rpc_result::dict() const noexcept { return *impl_->dict; }
std::optional<pool_location> rpc_result::location() const noexcept { return impl_->location; }

// --- promises and handles --------------------------------------------------------

rpc_promise::rpc_promise(std::shared_ptr<impl> state) : impl_(std::move(state)) {}
rpc_promise::rpc_promise(rpc_promise&&) noexcept = default;
rpc_promise& rpc_promise::operator=(rpc_promise&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->answer_error(error{errc::handler_failed, "the handler dropped its promise without answering"});
    impl_ = std::move(other.impl_);
  }
  return *this;
}
rpc_promise::~rpc_promise() {
  if (impl_) {
    impl_->answer_error(error{errc::handler_failed, "'" + impl_->method + "' dropped its promise without answering"});
  }
}

void rpc_promise::reply(const dict_builder& result) {
  if (impl_) impl_->answer(result);
}
void rpc_promise::reply(const dict_view& result) {
  if (impl_) impl_->answer(result);
}
void rpc_promise::reply_error(const error& err) {
  if (impl_) impl_->answer_error(err);
}
bool rpc_promise::answered() const noexcept { return !impl_ || impl_->answered.load(std::memory_order_acquire); }

void rpc_call_handle::state::complete(result<rpc_result> outcome) {
  if (finished.exchange(true, std::memory_order_acq_rel)) return;
  auto d = std::move(done);
  d(std::move(outcome));
}

void rpc_call_handle::cancel() const {
  if (!state_ || state_->finished.exchange(true, std::memory_order_acq_rel)) return;
  auto d = std::move(state_->done);
  if (state_->on_cancel) state_->on_cancel();
  d(error{errc::cancelled, "the call was cancelled"});
}

// --- dicts on the wire ---------------------------------------------------------------

std::optional<pool_location> locate_in_pool(client::impl& c, std::span<const std::byte> bytes) {
  auto* shm = c.host->shm();
  auto segments = shm != nullptr ? shm->segments() : nullptr;
  if (!segments || bytes.empty()) return std::nullopt;
  for (std::uint32_t i = 0; i < segments->size(); ++i) {
    const auto& s = *(*segments)[i];
    if (bytes.data() >= s.base() && bytes.data() + bytes.size() <= s.base() + s.size_bytes()) {
      return pool_location{i, static_cast<std::uint64_t>(bytes.data() - s.base()), bytes.size()};
    }
  }
  return std::nullopt;
}

rpc_args::rpc_args(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
rpc_args::rpc_args(rpc_args&&) noexcept = default;
rpc_args& rpc_args::operator=(rpc_args&&) noexcept = default;
rpc_args::~rpc_args() {
  // Pool memory never sent goes back to the owner now rather than when
  // this thread's channel closes.
  if (!impl_ || impl_->sent || impl_->buffer == 0) return;
  tell_node(*impl_->owner, wire::rpc{wire::rpc_release{impl_->buffer}});
}

std::span<std::byte> rpc_args::bytes() const noexcept { return impl_ ? impl_->bytes : std::span<std::byte>{}; }
std::optional<pool_location> rpc_args::location() const noexcept {
  return impl_ ? impl_->location : std::nullopt;
}

namespace {

/// Pool memory of the owner for `size` bytes, asked for on the calling
/// thread's direct shm channel; nothing when this client has none.
std::optional<result<rpc_args>> pool_buffer(client::impl& c, std::uint64_t size) {
  if (!shm_direct(c)) return std::nullopt;
  auto reply = direct_call(c, wire::rpc{wire::rpc_buffer{size}}, {}, c.options.timeout);
  if (!reply) return std::nullopt;
  auto body = reply_body<wire::rpc>(*reply);
  if (!body) return result<rpc_args>{std::move(body).error()};
  auto* given = std::get_if<wire::rpc_buffer_reply>(&body->body);
  if (given == nullptr) return result<rpc_args>{error{errc::protocol, "the owner answered an rpc buffer request oddly"}};
  auto state = std::make_unique<rpc_args::impl>();
  state->owner = &c;
  state->buffer = given->buffer;
  rpc_args args{std::move(state)};  // gives the buffer back if what follows fails
  auto mapped = c.host->shm()->map_region(region{given->where.segment, given->where.offset, given->where.length});
  if (!mapped || mapped->bytes.size() != size) {
    return result<rpc_args>{error{errc::unavailable, "the owner's pool is no longer mapped (the link went down)"}};
  }
  auto& s = *rpc_args_access::of(args);
  s.keep = std::move(mapped->keep);
  s.bytes = mapped->bytes;
  s.location = pool_location{given->where.segment, given->where.offset, given->where.length};
  return result<rpc_args>{std::move(args)};
}

}  // namespace

result<rpc_args> make_args(client::impl& c, std::uint64_t size, bool in_pool) {
  if (size == 0) return fail(errc::invalid_argument, "arguments of 0 bytes (an empty dict encodes to 64)");
  if (in_pool && !c.shm_address.empty()) {
    if (auto pooled = pool_buffer(c, size)) return std::move(*pooled);
  }
  auto buffer = std::make_shared<byte_buffer>(byte_buffer::allocate(size));
  auto state = std::make_unique<rpc_args::impl>();
  state->owner = &c;
  state->bytes = buffer->span();
  state->keep = std::move(buffer);
  return rpc_args{std::move(state)};
}

encoded_dict take_encoded(rpc_args& args) {
  auto& s = *rpc_args_access::of(args);
  s.sent = true;
  if (s.buffer != 0) return encoded_dict{{}, s.buffer};
  return encoded_dict{shared_bytes{s.keep, s.bytes}, 0};
}

result<encoded_dict> encode_dict(client::impl& c, const dict_builder& d) {
  auto size = d.encoded_size();
  auto args = make_args(c, size, size >= rpc_pool_bytes_min);
  if (!args) return args.error();
  if (auto ok = d.encode_into(args->bytes()); !ok) return ok.error();
  return take_encoded(*args);
}

result<rpc_result> to_rpc_result(client::impl& c, result<wire::message>& reply) {
  auto body = reply_body<wire::rpc>(reply);
  if (!body) return std::move(body).error();
  if (!std::holds_alternative<wire::rpc_reply>(body->body)) {
    return fail(errc::protocol, "an rpc call was answered with " + std::string{wire::rpc_body_name(body->body)});
  }
  auto& payload = reply->payload;
  auto dict = dict_view::parse(payload.span());
  if (!dict) return fail(errc::protocol, "the result is not a dict: " + dict.error().message());
  auto state = std::make_unique<rpc_result::impl>();
  state->location = locate_in_pool(c, payload.span());
  state->bytes = value{payload.owner(), payload.span(), 0};
  state->dict.emplace(std::move(*dict));
  return rpc_result{std::move(state)};
}

}  // namespace sluice
