// A CAF actor of the caller's own actor system served as an RPC endpoint
// (sluice/rpc_caf.hpp): calls from other clients arrive as messages.

#include <doctest/doctest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

#include "sluice/node.hpp"
#include "sluice/rpc_caf.hpp"
#include "tests/support/rpc.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::rpc_target;
using sluice::test::string_field;
using sluice::test::text_args;

using later_atom = caf::atom_constant<caf::atom("later")>;

/// Echoes "text" and says who answered; "fail" fails; "slow" answers
/// after 50 ms through a response promise.
caf::behavior echo_actor(caf::event_based_actor* self) {
  return {
      [self](sluice::rpc_call_atom, const sluice::caf_call& call) -> caf::result<sluice::rpc_answer> {
        auto* text = call.args().find("text");
        if (call.method() == "caf/fail") {
          return sluice::rpc_answer::failed(sluice::error{errc::permission_denied, "not for " + call.caller()});
        }
        sluice::dict_builder out;
        (void)out.add_string("text", text != nullptr ? text->as_string().value() : "");
        (void)out.add_string("by", "actor");
        if (call.method() != "caf/slow") return sluice::rpc_answer::of(out);
        auto promise = self->make_response_promise<sluice::rpc_answer>();
        auto answer = sluice::rpc_answer::of(out);
        self->delayed_send(self, std::chrono::milliseconds{50}, later_atom::value);
        self->become(caf::keep_behavior, [self, promise, answer](later_atom) mutable {
          promise.deliver(answer);
          self->unbecome();
        });
        return promise;
      },
  };
}

}  // namespace

TEST_CASE("rpc: a CAF actor served under a name receives calls as messages and answers as actors do") {
  auto cluster = sluice::local_cluster::start().value();
  auto server = sluice::test::shm_client(cluster->client_address(), "actor-host");
  auto caller = sluice::test::shm_client(cluster->client_address(), "caller");
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto actor = sys.spawn(echo_actor);
  for (auto name : {"caf/echo", "caf/fail", "caf/slow"}) REQUIRE(sluice::serve_actor(server->rpc(), name, actor).ok());

  auto r = caller->rpc().call(rpc_target::any(), "caf/echo", text_args("to an actor"));
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(string_field(r->dict()) == "to an actor");
  CHECK(string_field(r->dict(), "by") == "actor");

  auto refused = caller->rpc().call(rpc_target::any(), "caf/fail", text_args("x"));
  CHECK(refused.code() == errc::permission_denied);
  CHECK(refused.error().message().find(caller->rpc().id()) != std::string::npos);

  auto slow = caller->rpc().call_async(rpc_target::any(), "caf/slow", text_args("later"));
  auto later = slow.get();
  REQUIRE_MESSAGE(later.ok(), (later ? "" : later.error().to_string()));
  CHECK(string_field(later->dict()) == "later");

  // An actor that does not answer in time: the caller's deadline, as a timeout.
  auto silent = sys.spawn([]() -> caf::behavior {
    return {[](sluice::rpc_call_atom, const sluice::caf_call&) -> caf::result<sluice::rpc_answer> {
      return caf::delegated<sluice::rpc_answer>{};  // never answered
    }};
  });
  REQUIRE(sluice::serve_actor(server->rpc(), "caf/silent", silent).ok());
  auto timed_out = caller->rpc().call(rpc_target::any(), "caf/silent", text_args("x"), {.timeout = 200ms});
  CHECK(timed_out.code() == errc::timeout);

  // A gone actor: unavailable.
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  auto give_up = std::chrono::steady_clock::now() + 5s;
  sluice::result<sluice::rpc_result> gone = sluice::fail(errc::internal, "not tried");
  do {
    gone = caller->rpc().call(rpc_target::any(), "caf/echo", text_args("x"));
  } while (gone.ok() && std::chrono::steady_clock::now() < give_up);
  CHECK(gone.code() == errc::unavailable);
  for (auto name : {"caf/echo", "caf/fail", "caf/slow", "caf/silent"}) CHECK(server->rpc().unserve(name).ok());
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}
