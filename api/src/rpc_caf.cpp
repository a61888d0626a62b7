// A CAF actor as an RPC endpoint (sluice/rpc_caf.hpp): a bridge actor in
// the served actor's own system turns each call into a CAF request.
#include "sluice/rpc_caf.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include "runtime/memory/buffer.hpp"

namespace sluice::caf_bridge {

/// A call's promise while the bridge has it. A call whose message is
/// dropped (the bridge quit with its actor) is answered `unavailable`.
struct promise_hold {
  promise_hold(rpc_promise p, std::string m) : promise(std::move(p)), method(std::move(m)) {}
  promise_hold(const promise_hold&) = delete;
  promise_hold& operator=(const promise_hold&) = delete;
  rpc_promise promise;
  std::string method;
  ~promise_hold() {
    if (!promise.answered()) promise.reply_error(error{errc::unavailable, "the actor serving '" + method + "' is gone"});
  }
};

/// A call on its way to the bridge. The promise is shared: CAF messages
/// are copied, a promise is answered once.
struct bridged_call {
  caf_call call;
  std::shared_ptr<promise_hold> promise;
};

}  // namespace sluice::caf_bridge

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::caf_bridge::bridged_call)

namespace sluice {
namespace {

using caf_bridge::bridged_call;
using caf_bridge::promise_hold;
using bridge_atom = caf::atom_constant<caf::atom("rpc_bridge")>;

/// Shortest CAF request timeout: a call with (almost) no time left still
/// gets an answer, `timeout`, rather than none.
constexpr std::chrono::milliseconds bridge_timeout_min{1};

error from_caf(const caf::actor_system& sys, const caf::error& e, const std::string& method) {
  auto what = sys.render(e);
  if (e == caf::sec::request_timeout) return error{errc::timeout, "the actor serving '" + method + "' did not answer in time"};
  if (e == caf::sec::request_receiver_down) {
    return error{errc::unavailable, "the actor serving '" + method + "' is gone: " + what};
  }
  return error{errc::handler_failed, "the actor serving '" + method + "' failed: " + what};
}

void deliver(rpc_promise& p, const rpc_answer& a, const std::string& method) {
  if (a.failure()) return p.reply_error(*a.failure());
  if (a.encoded().empty()) return p.reply_error(error{errc::handler_failed, "the actor serving '" + method + "' answered nothing"});
  auto view = dict_view::parse(a.encoded());
  if (!view) return p.reply_error(error{errc::handler_failed, "the actor's answer is not a dict: " + view.error().message()});
  p.reply(*view);
}

caf::behavior bridge(caf::event_based_actor* self, caf::actor target) {
  // The bridge goes with its actor, so that an actor system can end while
  // a client still serves the name (its calls then fail unavailable).
  self->monitor(target);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  return {
      [self, target](bridge_atom, const bridged_call& b) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(b.call.deadline() - std::chrono::steady_clock::now());
        auto timeout = std::max(left, bridge_timeout_min);
        auto promise = b.promise;
        auto method = b.call.method();
        self->request(target, timeout, rpc_call_atom::value, b.call)
            .then([promise, method](const rpc_answer& a) { deliver(promise->promise, a, method); },
                  [self, promise, method](const caf::error& e) {
                    promise->promise.reply_error(from_caf(self->home_system(), e, method));
                  });
      },
  };
}

}  // namespace

rpc_answer rpc_answer::of(const dict_builder& result) {
  auto size = result.encoded_size();
  auto buffer = std::make_shared<byte_buffer>(byte_buffer::allocate(size));
  if (auto ok = result.encode_into(buffer->span()); !ok) return failed(ok.error());
  rpc_answer a;
  a.encoded_ = {buffer->data(), size};
  a.keep_ = std::move(buffer);
  return a;
}

rpc_answer rpc_answer::failed(error err) {
  rpc_answer a;
  a.failure_ = std::move(err);
  return a;
}

std::span<const std::byte> rpc_answer::encoded() const noexcept { return encoded_; }

result<void> serve_actor(rpc_endpoint& rpc, std::string_view name, caf::actor actor, serve_options options) {
  if (!actor) return fail(errc::invalid_argument, "serve_actor() needs an actor");
  auto& sys = actor->home_system();
  auto bridge_actor = sys.spawn(bridge, actor);
  // The bridge lives until its actor goes, or until the handler that
  // holds it is dropped (the name unserved or served again, the client's
  // end).
  return rpc.serve_async(
      name,
      [bridge_actor](rpc_request r, rpc_promise p) {
        auto method = r.method();
        bridged_call b{caf_call{std::make_shared<const rpc_request>(std::move(r))},
                       std::make_shared<promise_hold>(std::move(p), std::move(method))};
        caf::anon_send(bridge_actor, bridge_atom::value, std::move(b));
      },
      options);
}

}  // namespace sluice
