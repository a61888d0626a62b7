// client_link: one client-side end of a channel to the owner of this host
// — its socket, the mapped channel and pool segments, both rings — and
// the operations every user of such an end needs: taking the owner's
// greeting, writing frames, reading records (payloads by reference become
// views held by leases), releasing leases. Used by the transport's reader
// (shm_client) and by a calling thread's own direct channel (api/src/calls.cpp).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/memory/region.hpp"
#include "runtime/memory/segment.hpp"
#include "transports/shm/channel.hpp"
#include "transports/transport.hpp"

namespace sluice::transport::shm {

/// The owner's pool as mapped in this process; shared by every link of
/// the process to that owner, so one region has one address.
using segment_list = std::vector<std::unique_ptr<segment>>;

struct client_link {
  link_id id = 0;
  std::string address;
  unix_socket socket;
  std::unique_ptr<channel_memory> memory;
  unique_fd doorbell;
  std::shared_ptr<const segment_list> segments;
  std::optional<ring> responses;  // consumer: one thread only

  std::mutex send_mutex;
  std::optional<ring> requests;  // producer: under send_mutex
  bool up = false;               // under send_mutex
  // Frames sent before the greeting finished; flushed in order once it has.
  std::deque<wire::outbound_frame> early;  // under send_mutex
  std::uint64_t early_bytes = 0;           // under send_mutex
  bool closed = false;                     // under send_mutex
  // Leases given up but not yet told to the owner; under send_mutex.
  std::vector<std::uint64_t> releases;

  std::atomic<bool> close_requested{false};

  explicit client_link(unix_socket s) : socket(std::move(s)) {}
};

/// Connects to the owner's socket at `address`, takes its greeting (see
/// take_greeting for `mapped`) and writes `hello` as the first frame: a
/// link of its own for a calling thread (direct_call) or a Sluice thread.
result<std::shared_ptr<client_link>> open_client_link(std::string_view address, const wire::outbound_frame& hello,
                                                      std::shared_ptr<const segment_list> mapped = {});

/// Receives the owner's greeting and maps the channel and every segment —
/// or, with `mapped`, takes those mappings instead of making new ones
/// (the owner's segments arrive again and are closed unmapped).
result<void> take_greeting(client_link& c, std::shared_ptr<const segment_list> mapped = {});

/// A record from the response ring as a frame; a payload by reference
/// becomes a view of the pool that holds the lease (and `c`) until the
/// last copy goes.
result<wire::inbound_frame> take_record(const std::shared_ptr<client_link>& c,
                                        std::span<const std::byte> record,
                                        const wire::frame_limits& limits);

/// Writes pending releases, then `frame`. False when the ring has no room.
/// REQUIRES: c.send_mutex held, the link up.
bool write_locked(client_link& c, const wire::outbound_frame& frame);

/// Tells the owner about released leases now. Takes c.send_mutex.
void flush_releases(client_link& c);

/// The bytes of `r` in the mapped pool, when it lies inside a segment.
std::optional<std::span<std::byte>> resolve_in(const client_link& c, const region& r);

}  // namespace sluice::transport::shm
