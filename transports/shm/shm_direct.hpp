// shm_direct: a calling thread's own channel to the owner of its host,
// for synchronous requests with no thread hand-off at all. The thread
// writes its request into its own request ring and reads the answer from
// its own response ring itself, spinning briefly, then sleeping on the
// ring's futex. With the owner's poller spinning too, a round trip is two
// cache-line transfers each way: no system call, no wake-up.
//
// One per thread (not thread-safe for calls); values it returns may be
// used and released from any thread. To the owner it is one more client
// link: it greets like any client, and its leases go when it closes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/node_id.hpp"
#include "runtime/wire/messages.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/waiter.hpp"
#include "transports/transport.hpp"

namespace sluice::transport {

class shm_direct {
 public:
  /// Connects to the owner's shm socket, takes its greeting and sends
  /// `hello` (an encoded frame) so the owner knows who calls.
  /// `mapped`: the owner's pool as this process already mapped it (so a
  /// region has one address here); empty to map it anew.
  static result<std::unique_ptr<shm_direct>> open(std::string_view address, wire::outbound_frame hello,
                                                  std::shared_ptr<const shm::segment_list> mapped = {},
                                                  transport_limits limits = {},
                                                  shm::waiter_config waiter = {});
  ~shm_direct();
  shm_direct(const shm_direct&) = delete;
  shm_direct& operator=(const shm_direct&) = delete;

  /// Sends `request` (whose envelope carries `request_id`) and returns the
  /// decoded message that answers it, or `timeout` at `deadline`,
  /// `unavailable` when the owner went away (the channel is then broken
  /// for good).
  result<wire::message> call(const wire::outbound_frame& request, std::uint64_t request_id,
                             std::chrono::steady_clock::time_point deadline);

  /// False once the owner went away or the channel broke.
  bool usable() const noexcept { return usable_; }

 private:
  explicit shm_direct(std::shared_ptr<shm::client_link> link, transport_limits limits, shm::waiter_config w)
      : link_(std::move(link)), limits_(limits), waiter_(w) {}
  result<wire::message> wait_for(std::uint64_t request_id, std::chrono::steady_clock::time_point deadline);
  error broken(errc code, std::string why);

  std::shared_ptr<shm::client_link> link_;
  transport_limits limits_;
  shm::waiter waiter_;
  bool usable_ = true;
};

}  // namespace sluice::transport
