// sluice/rpc_caf.hpp: a CAF actor as an RPC endpoint, for services that
// run CAF actors of their own (CAF 0.17). The actor is served under a
// name like any handler (sluice/rpc.hpp) — callers on any node reach it
// through Sluice, without knowing it is an actor — and receives each call
// as an ordinary message in its own actor system, answering as actors do:
// by returning the answer, or later through a response promise.
//
//   caf::behavior embed(caf::event_based_actor*) {
//     return {
//       [](sluice::rpc_call_atom, const sluice::caf_call& call) {
//         sluice::dict_builder out;
//         out.add_int64("length", call.args().find("text")->as_string()->size());
//         return sluice::rpc_answer::of(out);
//       },
//     };
//   }
//   auto actor = my_system.spawn(embed);
//   sluice::serve_actor((*client)->rpc(), "embed", actor);
//
// This header names CAF types; the rest of Sluice's public API does not.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "sluice/rpc.hpp"

namespace sluice {

/// The message a served actor receives for each call:
/// (rpc_call_atom, caf_call), answered with an rpc_answer.
using rpc_call_atom = caf::atom_constant<caf::atom("rpc_call")>;

/// One call as a served actor sees it: a copyable handle; the arguments
/// stay valid (read in place) while any copy lives.
class caf_call {
 public:
  explicit caf_call(std::shared_ptr<const rpc_request> request) : request_(std::move(request)) {}

  const std::string& method() const noexcept { return request_->method(); }
  const dict_view& args() const noexcept { return request_->args(); }
  const std::string& caller() const noexcept { return request_->caller(); }
  std::chrono::steady_clock::time_point deadline() const noexcept { return request_->deadline(); }
  /// The caller cancelled, or the deadline passed: nobody reads the answer.
  bool cancelled() const noexcept { return request_->cancelled(); }

 private:
  std::shared_ptr<const rpc_request> request_;
};

/// What a served actor answers: a result dict (encoded when the answer is
/// made, so it borrows nothing afterwards) or an error. A value: copyable,
/// as CAF messages are. A default-constructed answer is no answer: the
/// caller gets handler_failed.
class rpc_answer {
 public:
  rpc_answer() = default;
  /// Encodes `result` now (an answer that failed to encode is that error).
  static rpc_answer of(const dict_builder& result);
  /// The caller gets `err`'s code and message.
  static rpc_answer failed(error err);

  /// The encoded result, 64-byte aligned; empty for an error.
  std::span<const std::byte> encoded() const noexcept;
  const std::optional<error>& failure() const noexcept { return failure_; }

 private:
  std::shared_ptr<const void> keep_;
  std::span<const std::byte> encoded_;
  std::optional<error> failure_;
};

/// Serves `name` with `actor`: each call becomes a request (rpc_call_atom,
/// caf_call) to it, made by a small bridge actor in the actor's own system
/// with the call's deadline, and its rpc_answer (or the error CAF reports:
/// a timeout, the actor being gone) goes back to the caller. Serving a
/// name again replaces its handler; unserve() it when the actor is done.
result<void> serve_actor(rpc_endpoint& rpc, std::string_view name, caf::actor actor, serve_options options = {});

}  // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::caf_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::rpc_answer)
