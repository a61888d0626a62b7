// shm_client: a client process's end of the shared-memory transport to
// the owner of its host. connect() reaches the owner's Unix socket; the
// owner hands over a channel (two rings) and its pool segments, which this
// side maps read-write, so values can be written and read in place. A
// reader thread waits on the response ring — spinning briefly, then
// sleeping on its futex — and delivers frames; it also notices the owner
// going away (its socket closes).
//
// One link at a time: a client talks to the one owner of its host.
#pragma once

#include <atomic>
#include <deque>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "runtime/log.hpp"
#include "runtime/memory/region.hpp"
#include "runtime/memory/segment.hpp"
#include "transports/shm/channel.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/waiter.hpp"
#include "transports/transport.hpp"

namespace sluice::transport {

struct shm_client_options {
  shm::waiter_config waiter;
};

class shm_client final : public transport {
 public:
  /// `sink` must outlive this transport.
  shm_client(std::uint16_t tag, link_sink& sink, transport_limits limits = {},
             shm_client_options options = {});
  ~shm_client() override;
  shm_client(const shm_client&) = delete;
  shm_client& operator=(const shm_client&) = delete;

  std::string_view scheme() const noexcept override { return "shm"; }
  /// Clients do not accept shm links: fails with invalid_argument.
  result<std::string> listen(std::string_view address) override;
  /// Connects to the owner's socket ("path" or "@name"), takes its
  /// greeting and maps its segments, then reports on_link_up from the
  /// reader thread. Fails at once when nobody listens there.
  result<link_id> connect(std::string_view address) override;
  result<void> send(link_id link, wire::outbound_frame frame) override;
  void close(link_id link) override;
  void shutdown() override;

  /// The bytes of `r` in this process's mapping of the owner's pool, when
  /// `r` lies within a mapped segment. Thread-safe once the link is up.
  std::optional<std::span<std::byte>> resolve(const region& r) const;

  /// Like resolve(), with a handle that keeps the mapping alive (even if
  /// the link goes down meanwhile) for as long as the caller holds it.
  struct mapped_region {
    std::shared_ptr<void> keep;
    std::span<std::byte> bytes;
  };
  std::optional<mapped_region> map_region(const region& r) const;

  /// Whether a link to the owner is up now.
  bool connected() const;

  /// The owner's pool as this process mapped it, while a link is up.
  std::shared_ptr<const shm::segment_list> segments() const;

  /// Links a process's calling threads opened to the same owner, which
  /// have no reader thread of their own (each thread's channel for its
  /// synchronous calls): the reader here tells the owner of the leases
  /// they let go within a nap (waiter_config::nap_us) when their threads
  /// make no call that would carry them. Forgotten once expired. At most
  /// adopted_links_max at once; beyond, false (their leases then go with
  /// their next call, or with 64 of them).
  static constexpr std::size_t adopted_links_max = 4096;
  bool adopt(std::weak_ptr<shm::client_link> link);

 private:
  using connection = shm::client_link;
  void read_loop(std::shared_ptr<connection> c);
  void finish(connection& c, const error& reason);
  /// Tells the owner of the leases adopted links let go.
  void flush_adopted();

  const std::uint16_t tag_;
  link_sink& sink_;  // not owned; outlives this transport
  const transport_limits limits_;
  const shm_client_options options_;
  const logger_ptr log_;

  std::mutex mutex_;  // guards current_, next_sequence_
  std::shared_ptr<connection> current_;
  std::uint64_t next_sequence_ = 1;
  std::thread reader_;
  std::atomic<bool> stopping_{false};
  std::once_flag shutdown_once_;

  std::mutex adopted_mutex_;  // guards adopted_
  std::vector<std::weak_ptr<connection>> adopted_;
};

}  // namespace sluice::transport
