#include "transports/shm/client_link.hpp"

#include <cstring>

#include "transports/shm/frame_copy.hpp"

namespace sluice::transport::shm {
namespace {

/// Room for a greeting naming greeting_segments_max segments.
constexpr std::size_t greeting_bytes_max = 16 + 8 * greeting_segments_max;
/// Releases piled up before they go out without waiting for a record.
constexpr std::size_t releases_batch = 64;

bool write_releases_locked(client_link& c) {
  if (c.releases.empty()) return true;
  auto count = std::min(c.releases.size(), releases_per_record_max);
  auto room = c.requests->reserve(static_cast<std::uint32_t>(sizeof(record_prefix) + 8 * count));
  if (!room) return false;
  record_prefix prefix{static_cast<std::uint32_t>(record_kind::release), 0};
  std::memcpy(room->data(), &prefix, sizeof prefix);
  std::memcpy(room->data() + sizeof prefix, c.releases.data(), 8 * count);
  c.requests->commit();
  c.releases.erase(c.releases.begin(), c.releases.begin() + static_cast<long>(count));
  return c.releases.empty();
}

/// Holds a payload read in place: the link (so the pool stays mapped) and
/// the lease; letting go tells the owner (batched).
struct lease_hold {
  lease_hold(std::shared_ptr<client_link> l, std::uint64_t id) : link(std::move(l)), lease(id) {}
  lease_hold(const lease_hold&) = delete;
  lease_hold& operator=(const lease_hold&) = delete;
  ~lease_hold() {
    std::lock_guard guard{link->send_mutex};
    if (link->closed) return;  // the owner let go of everything already
    link->releases.push_back(lease);
    if (link->releases.size() >= releases_batch && write_releases_locked(*link)) {
      notify_poller(*link->requests, link->doorbell.get());
    }
  }
  std::shared_ptr<client_link> link;
  std::uint64_t lease;
};

result<void> map_segments(client_link& c, const greeting& g, std::shared_ptr<const segment_list> mapped) {
  if (mapped && mapped->size() != g.segment_bytes.size()) mapped.reset();
  auto fresh = std::make_shared<segment_list>();
  std::size_t index = 0;
  while (index < g.segment_bytes.size()) {
    std::uint32_t count = 0;
    auto batch = c.socket.receive(std::as_writable_bytes(std::span{&count, 1}), unix_fds_max);
    if (!batch) return batch.error();
    if (batch->bytes != sizeof count || count != batch->fd_count || index + count > g.segment_bytes.size()) {
      return fail(errc::protocol, "malformed pool segment message from the owner");
    }
    for (std::uint32_t i = 0; i < count; ++i, ++index) {
      if (mapped) continue;  // the descriptor closes with the batch
      auto seg = segment::attach(batch->fds[i].release(), g.segment_bytes[index], access_mode::read_write);
      if (!seg) return seg.error();
      fresh->push_back(std::move(*seg));
    }
  }
  c.segments = mapped ? std::move(mapped) : std::shared_ptr<const segment_list>{std::move(fresh)};
  return {};
}

}  // namespace

result<void> take_greeting(client_link& c, std::shared_ptr<const segment_list> mapped) {
  std::vector<std::byte> buffer(greeting_bytes_max);
  auto msg = c.socket.receive(buffer, 2);
  if (!msg) return msg.error();
  if (msg->fd_count != 2) return fail(errc::protocol, "the owner's greeting lacks its descriptors");
  auto g = decode_greeting(std::span{buffer}.first(msg->bytes));
  if (!g) return g.error();
  auto memory = channel_memory::attach(std::move(msg->fds[0]), g->ring_bytes);
  if (!memory) return memory.error();
  c.memory = std::move(*memory);
  c.doorbell = std::move(msg->fds[1]);
  auto responses = ring::attach(c.memory->responses_area());
  auto requests = ring::attach(c.memory->requests_area());
  if (!responses || !requests) return fail(errc::protocol, "the owner's rings do not attach");
  c.responses.emplace(std::move(*responses));
  c.requests.emplace(std::move(*requests));
  return map_segments(c, *g, std::move(mapped));
}

result<wire::inbound_frame> take_record(const std::shared_ptr<client_link>& c,
                                        std::span<const std::byte> record,
                                        const wire::frame_limits& limits) {
  record_prefix prefix;
  if (record.size() < sizeof prefix) return fail(errc::protocol, "a ring record without a prefix");
  std::memcpy(&prefix, record.data(), sizeof prefix);
  auto body = record.subspan(sizeof prefix);
  if (prefix.kind == static_cast<std::uint32_t>(record_kind::frame)) return copy_inbound(body, limits);
  if (prefix.kind != static_cast<std::uint32_t>(record_kind::frame_by_ref) || body.size() < sizeof(region_ref)) {
    return fail(errc::protocol, "a ring record of an unknown kind");
  }
  region_ref ref;
  std::memcpy(&ref, body.data(), sizeof ref);
  auto bytes = resolve_in(*c, region{ref.segment, ref.offset, ref.length});
  if (!bytes) return fail(errc::protocol, "the owner sent a region outside its pool");
  // The frame's header announces the payload's length: it must be the
  // region's.
  auto frame = copy_inbound(body.subspan(sizeof ref), limits, ref.length);
  if (!frame) return frame;
  frame->payload = shared_bytes{std::make_shared<lease_hold>(c, ref.lease), *bytes};
  return frame;
}

result<std::shared_ptr<client_link>> open_client_link(std::string_view address, const wire::outbound_frame& hello,
                                                      std::shared_ptr<const segment_list> mapped) {
  auto s = unix_socket::connect(address);
  if (!s) return s.error();
  auto link = std::make_shared<client_link>(std::move(*s));
  link->address = std::string{address};
  if (auto ok = take_greeting(*link, std::move(mapped)); !ok) return ok.error();
  std::lock_guard guard{link->send_mutex};
  link->up = true;
  if (!write_locked(*link, hello)) return fail(errc::overloaded, "the hello does not fit the shm ring");
  notify_poller(*link->requests, link->doorbell.get());
  return link;
}

bool write_locked(client_link& c, const wire::outbound_frame& frame) {
  write_releases_locked(c);
  auto size = sizeof(record_prefix) + frame.size();
  if (size > c.requests->record_bytes_max()) return false;
  auto room = c.requests->reserve(static_cast<std::uint32_t>(size));
  if (!room) return false;
  record_prefix prefix{static_cast<std::uint32_t>(record_kind::frame), 0};
  std::memcpy(room->data(), &prefix, sizeof prefix);
  std::memcpy(room->data() + sizeof prefix, frame.head.data(), frame.head.size());
  if (!frame.payload.empty()) {
    std::memcpy(room->data() + sizeof prefix + frame.head.size(), frame.payload.data(), frame.payload.size());
  }
  c.requests->commit();
  return true;
}

void flush_releases(client_link& c) {
  std::lock_guard guard{c.send_mutex};
  if (c.closed || !c.up || c.releases.empty()) return;
  if (write_releases_locked(c)) notify_poller(*c.requests, c.doorbell.get());
}

std::optional<std::span<std::byte>> resolve_in(const client_link& c, const region& r) {
  if (!c.segments || r.segment >= c.segments->size()) return std::nullopt;
  auto& seg = *(*c.segments)[r.segment];
  if (r.offset > seg.size_bytes() || r.length > seg.size_bytes() - r.offset) return std::nullopt;
  return std::span<std::byte>{seg.base() + r.offset, r.length};
}

}  // namespace sluice::transport::shm
