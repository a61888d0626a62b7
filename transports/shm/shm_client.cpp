#include "transports/shm/shm_client.hpp"

#include <fmt/format.h>

#include "transports/shm/frame_copy.hpp"

namespace sluice::transport {
namespace {

/// Room for a greeting naming greeting_segments_max segments.
constexpr std::size_t greeting_bytes_max = 16 + 8 * shm::greeting_segments_max;
/// Records delivered per wake-up before the reader looks at the socket.
constexpr int records_per_turn = 256;

}  // namespace

struct shm_client::connection {
  link_id id = 0;
  std::string address;
  shm::unix_socket socket;
  std::unique_ptr<shm::channel_memory> memory;
  shm::unique_fd doorbell;
  std::vector<std::unique_ptr<segment>> segments;
  std::optional<shm::ring> responses;  // consumer: reader thread only

  std::mutex send_mutex;
  std::optional<shm::ring> requests;  // producer: under send_mutex
  bool up = false;                    // under send_mutex
  // Frames sent before the greeting finished; flushed in order once it has.
  std::deque<wire::outbound_frame> early;  // under send_mutex
  std::uint64_t early_bytes = 0;           // under send_mutex
  bool closed = false;                // under send_mutex

  std::atomic<bool> close_requested{false};
  // Leases given up while the request ring was full; sent with the next
  // record. Under send_mutex.
  std::vector<std::uint64_t> releases;

  explicit connection(shm::unix_socket s) : socket(std::move(s)) {}
};

namespace {

/// Holds a payload read in place: the connection (so the pool stays
/// mapped) and the lease; letting go tells the owner.
struct lease_hold {
  lease_hold(std::shared_ptr<shm_client::connection> l, std::uint64_t id) : link(std::move(l)), lease(id) {}
  lease_hold(const lease_hold&) = delete;
  lease_hold& operator=(const lease_hold&) = delete;
  ~lease_hold();
  std::shared_ptr<shm_client::connection> link;
  std::uint64_t lease;
};

}  // namespace

shm_client::shm_client(std::uint16_t tag, link_sink& sink, transport_limits limits,
                       shm_client_options options)
    : tag_(tag), sink_(sink), limits_(limits), options_(options), log_(get_logger("shm")) {}

shm_client::~shm_client() { shutdown(); }

result<std::string> shm_client::listen(std::string_view address) {
  return fail(errc::invalid_argument,
              "a client does not accept shm links ('" + std::string{address} + "')");
}

result<link_id> shm_client::connect(std::string_view address) {
  auto s = shm::unix_socket::connect(address);
  if (!s) {
    return fail(s.code(), "cannot reach an owner's shm socket at " + std::string{address} + ": " +
                              s.error().message());
  }
  auto c = std::make_shared<connection>(std::move(*s));
  c->address = std::string{address};
  std::lock_guard guard{mutex_};
  if (stopping_) return fail(errc::unavailable, "the shm transport is shut down");
  if (current_) return fail(errc::conflict, "this client already has an shm link to its owner");
  c->id = make_link_id(tag_, next_sequence_++);
  current_ = c;
  if (reader_.joinable()) reader_.join();  // a previous link's reader has finished
  reader_ = std::thread([this, c] { read_loop(c); });
  return c->id;
}

result<void> shm_client::take_greeting(connection& c) {
  std::vector<std::byte> buffer(greeting_bytes_max);
  auto msg = c.socket.receive(buffer, 2);
  if (!msg) return msg.error();
  if (msg->fd_count != 2) return fail(errc::protocol, "the owner's greeting lacks its descriptors");
  auto g = shm::decode_greeting(std::span{buffer}.first(msg->bytes));
  if (!g) return g.error();
  auto memory = shm::channel_memory::attach(std::move(msg->fds[0]), g->ring_bytes);
  if (!memory) return memory.error();
  c.memory = std::move(*memory);
  c.doorbell = std::move(msg->fds[1]);
  auto responses = shm::ring::attach(c.memory->responses_area());
  auto requests = shm::ring::attach(c.memory->requests_area());
  if (!responses || !requests) return fail(errc::protocol, "the owner's rings do not attach");
  c.responses.emplace(std::move(*responses));
  c.requests.emplace(std::move(*requests));
  std::size_t index = 0;
  while (index < g->segment_bytes.size()) {
    std::uint32_t count = 0;
    auto batch = c.socket.receive(std::as_writable_bytes(std::span{&count, 1}), shm::unix_fds_max);
    if (!batch) return batch.error();
    if (batch->bytes != sizeof count || count != batch->fd_count || index + count > g->segment_bytes.size()) {
      return fail(errc::protocol, "malformed pool segment message from the owner");
    }
    for (std::uint32_t i = 0; i < count; ++i, ++index) {
      auto seg = segment::attach(batch->fds[i].release(), g->segment_bytes[index], access_mode::read_write);
      if (!seg) return seg.error();
      c.segments.push_back(std::move(*seg));
    }
  }
  return {};
}

namespace {

bool write_releases_locked(shm_client::connection& c) {
  if (c.releases.empty()) return true;
  auto count = std::min(c.releases.size(), shm::releases_per_record_max);
  auto room = c.requests->reserve(static_cast<std::uint32_t>(sizeof(shm::record_prefix) + 8 * count));
  if (!room) return false;
  shm::record_prefix prefix{static_cast<std::uint32_t>(shm::record_kind::release), 0};
  std::memcpy(room->data(), &prefix, sizeof prefix);
  std::memcpy(room->data() + sizeof prefix, c.releases.data(), 8 * count);
  c.requests->commit();
  c.releases.erase(c.releases.begin(), c.releases.begin() + static_cast<long>(count));
  return c.releases.empty();
}

lease_hold::~lease_hold() {
  std::lock_guard guard{link->send_mutex};
  if (link->closed) return;  // the owner let go of everything already
  link->releases.push_back(lease);
  // Batch: a release waits for the next record unless many have piled up.
  if (link->releases.size() >= 64 && write_releases_locked(*link)) {
    shm::notify_poller(*link->requests, link->doorbell.get());
  }
}

}  // namespace

result<wire::inbound_frame> shm_client::take_record(const std::shared_ptr<connection>& c,
                                                    std::span<const std::byte> record) {
  shm::record_prefix prefix;
  if (record.size() < sizeof prefix) return fail(errc::protocol, "a ring record without a prefix");
  std::memcpy(&prefix, record.data(), sizeof prefix);
  auto body = record.subspan(sizeof prefix);
  if (prefix.kind == static_cast<std::uint32_t>(shm::record_kind::frame)) {
    return shm::copy_inbound(body, limits_.frame);
  }
  if (prefix.kind != static_cast<std::uint32_t>(shm::record_kind::frame_by_ref) ||
      body.size() < sizeof(shm::region_ref)) {
    return fail(errc::protocol, "a ring record of an unknown kind");
  }
  shm::region_ref ref;
  std::memcpy(&ref, body.data(), sizeof ref);
  auto head = body.subspan(sizeof ref);
  auto bytes = resolve_in(*c, region{ref.segment, ref.offset, ref.length});
  if (!bytes) return fail(errc::protocol, "the owner sent a region outside its pool");
  // The frame's header announces the payload's length; check it against
  // the region before reading the envelope alone.
  auto frame = shm::copy_inbound(head, limits_.frame, ref.length);
  if (!frame) return frame;
  auto hold = std::make_shared<lease_hold>(c, ref.lease);
  frame->payload = shared_bytes{std::move(hold), *bytes};
  return frame;
}

void shm_client::read_loop(std::shared_ptr<connection> c) {
  if (auto ok = take_greeting(*c); !ok) {
    log_->warn("shm link to {} failed at the greeting: {}", c->address, ok.error().to_string());
    finish(*c, ok.error());
    return;
  }
  bool flushed = true;
  {
    std::lock_guard guard{c->send_mutex};
    c->up = true;
    for (auto& frame : c->early) flushed = flushed && write_locked(*c, frame);
    if (c->early_bytes != 0) shm::notify_poller(*c->requests, c->doorbell.get());
    c->early.clear();
    c->early_bytes = 0;
  }
  if (!flushed) {
    return finish(*c, error{errc::overloaded, "frames sent while connecting do not fit the shm ring"});
  }
  sink_.on_link_up(c->id, c->address);
  shm::waiter w{options_.waiter};
  while (!stopping_ && !c->close_requested) {
    auto state = w.wait_readable(*c->responses, std::chrono::steady_clock::now() + options_.waiter.nap_us);
    if (state == shm::wait_result::broken) return finish(*c, error{errc::protocol, "the owner's response ring is corrupt"});
    if (state == shm::wait_result::closed) return finish(*c, error{errc::unavailable, "the owner closed the link"});
    if (state == shm::wait_result::timed_out) {
      if (c->socket.peer_closed()) return finish(*c, error{errc::unavailable, "the owner process went away"});
      flush_releases(*c);
      continue;
    }
    for (int n = 0; n < records_per_turn; ++n) {
      auto record = c->responses->peek();
      if (!record) break;
      auto frame = take_record(c, *record);
      c->responses->pop();
      if (!frame) return finish(*c, frame.error());
      if (auto taken = sink_.on_frame(c->id, std::move(*frame)); !taken) return finish(*c, taken.error());
    }
    shm::notify_producer(*c->responses);
    flush_releases(*c);
  }
  finish(*c, error{errc::aborted, "closed locally"});
}

void shm_client::finish(connection& c, const error& reason) {
  {
    std::lock_guard guard{c.send_mutex};
    if (c.closed) return;
    c.closed = true;
    if (c.requests) shm::close_and_wake(*c.requests);
  }
  {
    std::lock_guard guard{mutex_};
    if (current_.get() == &c) current_.reset();
  }
  if (!stopping_) sink_.on_link_down(c.id, reason);
}

result<void> shm_client::send(link_id link, wire::outbound_frame frame) {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{mutex_};
    c = current_;
  }
  if (!c || c->id != link) return fail(errc::unavailable, fmt::format("shm link {:#x} is not open", link));
  std::lock_guard guard{c->send_mutex};
  if (c->closed) return fail(errc::unavailable, fmt::format("shm link {:#x} is closed", link));
  if (!c->up) {
    if (c->early_bytes + frame.size() > limits_.max_queued_bytes) {
      return fail(errc::overloaded, "too many frames wait for the shm link to come up");
    }
    c->early_bytes += frame.size();
    c->early.push_back(std::move(frame));
    return {};
  }
  if (auto ok = shm::check_outbound(frame, c->requests->record_bytes_max() - 64); !ok) return ok;
  if (!write_locked(*c, frame)) {
    return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
  }
  shm::notify_poller(*c->requests, c->doorbell.get());
  return {};
}

bool shm_client::write_locked(connection& c, const wire::outbound_frame& frame) {
  write_releases_locked(c);
  auto size = sizeof(shm::record_prefix) + frame.size();
  if (size > c.requests->record_bytes_max()) return false;
  auto room = c.requests->reserve(static_cast<std::uint32_t>(size));
  if (!room) return false;
  shm::record_prefix prefix{static_cast<std::uint32_t>(shm::record_kind::frame), 0};
  std::memcpy(room->data(), &prefix, sizeof prefix);
  std::memcpy(room->data() + sizeof prefix, frame.head.data(), frame.head.size());
  if (!frame.payload.empty()) {
    std::memcpy(room->data() + sizeof prefix + frame.head.size(), frame.payload.data(), frame.payload.size());
  }
  c.requests->commit();
  return true;
}

void shm_client::flush_releases(connection& c) {
  std::lock_guard guard{c.send_mutex};
  if (c.closed || !c.up || c.releases.empty()) return;
  if (write_releases_locked(c)) shm::notify_poller(*c.requests, c.doorbell.get());
}

std::optional<std::span<std::byte>> shm_client::resolve_in(const connection& c, const region& r) {
  if (r.segment >= c.segments.size()) return std::nullopt;
  auto& seg = *c.segments[r.segment];
  if (r.offset > seg.size_bytes() || r.length > seg.size_bytes() - r.offset) return std::nullopt;
  return std::span<std::byte>{seg.base() + r.offset, r.length};
}

void shm_client::close(link_id link) {
  std::lock_guard guard{mutex_};
  if (current_ && current_->id == link) current_->close_requested = true;
}

void shm_client::shutdown() {
  std::call_once(shutdown_once_, [this] {
    stopping_ = true;
    {
      std::lock_guard guard{mutex_};
      if (current_) current_->close_requested = true;
    }
    if (reader_.joinable()) reader_.join();
  });
}

std::optional<shm_client::mapped_region> shm_client::map_region(const region& r) const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return std::nullopt;
  auto bytes = resolve_in(*c, r);
  if (!bytes) return std::nullopt;
  return mapped_region{c, *bytes};
}

bool shm_client::connected() const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return false;
  std::lock_guard guard{c->send_mutex};
  return c->up && !c->closed;
}

std::optional<std::span<std::byte>> shm_client::resolve(const region& r) const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return std::nullopt;
  return resolve_in(*c, r);
}

}  // namespace sluice::transport
