// How the library's threads send requests, in one place: on the calling
// thread's own shm channel or TCP link straight to the owner (direct_call), handed to
// the client node's actor (through_node, tell_node), a thread waiting for
// the node's answer (promise_callback, wait_for), and a synchronous
// request that takes the first way when it can and the second otherwise
// (ask).
//
// The deadline rules: a call's timeout, or the client's default when it
// gives none (effective); a thread waiting on the node gives it sync_slack
// more than that, so that the node's own timeout error answers first.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "api/src/client_impl.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/interrupt.hpp"

namespace sluice {

/// A synchronous request from the calling thread straight to the owner
/// through that thread's own channel (opened on first use), with no
/// hand-off to the client node's threads: its shm channel when the client
/// reaches its owner through shared memory, else its own TCP link when
/// the client may reach the owner over TCP. Nothing when no direct path
/// is available (an in-process client, or the channel could not be
/// opened): then the caller goes the usual way.
std::optional<result<wire::message>> direct_call(client::impl& c, const wire::body& request,
                                                 const shared_bytes& payload, std::chrono::milliseconds timeout);

/// Whether direct calls of `c` go through shared memory (and answers may
/// name regions of the owner's pool, which this process maps).
bool shm_direct(const client::impl& c);

/// The hello a link of this client opens with (a direct channel, an rpc
/// channel): the owner then knows which client it is.
wire::outbound_frame client_hello(const client::impl& c);

/// How much longer than its deadline a thread waits for the node.
inline constexpr std::chrono::milliseconds sync_slack{1000};

template <class T>
using callback = std::function<void(result<T>)>;

/// `timeout`, or the client's default when it is 0.
inline std::chrono::milliseconds effective(const client::impl& c, std::chrono::milliseconds timeout) {
  return timeout.count() > 0 ? timeout : c.options.timeout;
}
inline std::chrono::milliseconds effective(const client::impl& c, const call_options& o) {
  return effective(c, o.timeout);
}

/// Sends `request` through the client node (any transport); `done` runs
/// once with the answer as it came, on a Sluice thread.
void through_node(client::impl& c, wire::body request, shared_bytes payload, std::chrono::milliseconds timeout,
                  callback<wire::message> done);
/// Sends `notice` through the client node; nothing answers it.
void tell_node(client::impl& c, wire::body notice);

/// A callback that fulfils the future it comes with.
template <class T>
std::pair<callback<T>, std::future<result<T>>> promise_callback() {
  auto promise = std::make_shared<std::promise<result<T>>>();
  auto future = promise->get_future();
  return {[promise](result<T> r) { promise->set_value(std::move(r)); }, std::move(future)};
}

/// Waits for what the node answers a request due within `timeout`.
/// With an interrupt scope on the thread, the wait is cut in its slices
/// and ends `cancelled` when the scope says so (the answer, when it
/// comes, goes nowhere).
template <class T>
result<T> wait_for(std::future<result<T>> future, std::chrono::milliseconds timeout) {
  auto limit = timeout + sync_slack;
  auto end = std::chrono::steady_clock::now() + limit;
  const auto* scope = interrupt_scope::current();
  auto slice = scope != nullptr ? scope->every() : limit;
  while (future.wait_for(std::min<std::chrono::nanoseconds>(slice, end - std::chrono::steady_clock::now())) !=
         std::future_status::ready) {
    if (std::chrono::steady_clock::now() >= end) {
      return fail(errc::timeout, "no answer from the client node within " + std::to_string(limit.count()) + " ms");
    }
    if (scope != nullptr && scope->interrupted()) return fail(errc::cancelled, "interrupted while waiting for an answer");
  }
  return future.get();
}

/// A request answered on the calling thread: its direct channel when it
/// has one, else through the client node.
result<wire::message> ask(client::impl& c, const wire::body& request, const shared_bytes& payload,
                          std::chrono::milliseconds timeout);

}  // namespace sluice
