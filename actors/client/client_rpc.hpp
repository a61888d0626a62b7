// Calls that reach a client node on its own link to the owner: handlers
// served without a channel of their own (a client over TCP, a client in
// the simulator, a CAF actor registered as an endpoint). The client actor
// hands each call to whatever the embedding code put in its slot and sends
// back the answer it is given, from any thread (docs/rpc.md).
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "actors/common/endpoint.hpp"
#include "runtime/wire/messages.hpp"

namespace sluice {

/// What serves the calls arriving on a client's link. Thread-safe.
class rpc_served {
 public:
  /// Sends the answer to one call (an rpc_reply or error_reply body, and
  /// the result as payload). Any thread; once per call.
  using answer_fn = std::function<void(wire::body body, shared_bytes payload)>;

  virtual ~rpc_served() = default;
  /// An rpc_call request arrived; it must be answered through `answer`.
  /// Called on the client actor: must not block.
  virtual void on_call(wire::message call, answer_fn answer) = 0;
  /// The caller gave up the call with this request id.
  virtual void on_cancel(std::uint64_t id) = 0;
  /// The client's link to its owner went down: what it served there is
  /// gone from the owner (and is to be served again on the next link).
  virtual void on_link_down() {}
};

/// Where a client node finds its rpc_served, which the embedding code
/// sets (and replaces) at any time; empty: calls are answered not_found.
class rpc_served_slot {
 public:
  void set(std::shared_ptr<rpc_served> target) {
    std::lock_guard guard{mutex_};
    target_ = std::move(target);
  }
  std::shared_ptr<rpc_served> get() const {
    std::lock_guard guard{mutex_};
    return target_;
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<rpc_served> target_;
};

/// An answer to a served call, on its way back to the client actor.
struct served_answer {
  request_context ctx;
  wire::body body;
  shared_bytes payload;
};

/// (rpc_answer_atom, served_answer): send this answer to the call's owner.
using rpc_answer_atom = caf::atom_constant<caf::atom("rpc_answer")>;

}  // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::served_answer)
