// call_channel: a link of its own between a client and its owner, with a
// thread of its own that reads it. Requests go out on it from any thread
// and their answers complete on its thread; frames that answer nothing
// (a call to a handler this client serves, a cancel of one) go to a hook,
// also on its thread. Neither waits for the client node's actors
// (design.md, "Hot path"). It carries frames and knows no entry point:
// RPC's asynchronous calls and its serving both run on channels of their
// own (rpc_endpoint.cpp, rpc_serve_calls.cpp).
//
// Two kinds of link carry it: on the owner's host a pair of shm rings (the
// thread reads its ring itself, spinning for a while, configurable, then
// sleeping on the ring's futex); elsewhere a TCP connection of its own
// (the thread blocks in recv; request() writes to the socket on the
// caller's thread).
//
// To the owner it is one more link of the client (it greets with the
// client's hello); when it closes — or the process dies — the owner fails
// what was in flight on it at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/client/request_table.hpp"
#include "runtime/wire/messages.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/transport.hpp"

namespace sluice {

class call_channel {
 public:
  using reply_fn = std::function<void(result<wire::message>)>;
  using clock = request_clock;

  /// What the channel's thread hands to its user.
  struct hooks {
    /// A frame that answers none of this channel's requests (a call to a
    /// handler this client serves, a cancel of one); the owner's hello is
    /// not handed on.
    std::function<void(wire::message)> on_frame;
    /// The link broke (the owner went away); not called when the channel
    /// is closed by its destructor.
    std::function<void()> on_down;
    /// At every turn of the thread (at least every few ms): what is due
    /// by `now` may be done.
    std::function<void(clock::time_point now)> on_tick;
  };

  /// Opens a link to the owner's shm socket at `address`, sends `hello`
  /// and starts the thread. `mapped`: the owner's pool as this process
  /// mapped it already (one address per region in this process).
  static result<std::shared_ptr<call_channel>> open(const std::string& address, const wire::outbound_frame& hello,
                                                   std::shared_ptr<const transport::shm::segment_list> mapped,
                                                   hooks h, std::chrono::microseconds spin);
  /// Opens a TCP connection of its own to the owner at `address` (a
  /// numeric "host:port": never the resolver), sends `hello` and starts
  /// the thread; gives up with timeout at `deadline`.
  static result<std::shared_ptr<call_channel>> open_tcp(const std::string& address, const wire::outbound_frame& hello,
                                                       clock::time_point deadline, hooks h,
                                                       wire::frame_limits limits = {});
  /// Stops the thread and closes the link (the owner lets go of what it
  /// lent to this link). REQUIRES: not called on the channel's thread.
  ~call_channel();
  call_channel(const call_channel&) = delete;
  call_channel& operator=(const call_channel&) = delete;

  /// Sends `env` as a request (its request_id is set here) and runs
  /// `done` exactly once, on the channel's thread: the answer, the error
  /// it carried, `timeout` at `deadline`, or `unavailable` when the link
  /// breaks. Any thread. Returns the request id (0 when it failed at once).
  std::uint64_t request(wire::envelope env, shared_bytes payload, clock::time_point deadline, reply_fn done);
  /// Sends a frame nobody answers (a reply, a cancel). Any thread.
  result<void> send(const wire::outbound_frame& frame);
  /// False once the link broke.
  bool usable() const noexcept { return usable_.load(std::memory_order_acquire); }
  /// How long the thread spins before it sleeps, from its next wait on
  /// (shm; a TCP channel's thread blocks in recv).
  void set_spin(std::chrono::microseconds spin);
  std::thread::id thread_id() const noexcept { return thread_.get_id(); }

  /// What carries a channel (call_channel.cpp has the two kinds).
  class link;

 private:
  call_channel(std::unique_ptr<link> l, hooks h);
  void run();
  void dispatch(wire::message msg);
  void finish(std::uint64_t id, result<wire::message> outcome);
  void expire(clock::time_point now);
  clock::time_point next_wake(clock::time_point now);
  void fail_all(const error& why);

  std::unique_ptr<link> link_;
  hooks hooks_;
  std::atomic<bool> usable_{true};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closing_{false};  // the destructor runs

  std::mutex pending_mutex_;  // guards pending_
  /// The calls this client made that wait for their answers; they
  /// complete on the channel's thread.
  request_table<reply_fn> pending_{max_pending_requests};

  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace sluice
