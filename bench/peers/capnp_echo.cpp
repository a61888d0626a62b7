// capnp_echo: Cap'n Proto RPC (Debian's libcapnp, capnp-rpc) as a peer in
// `bench/run rpc`.
//
//   capnp_echo serve --port N       an EzRpcServer; prints "ready"
//   capnp_echo call --port N [--seconds S]
//       4 KiB echo like rpc_bench: one call at a time (c1), then 8 in
//       flight on the client's event loop (c8); figure lines
//       rpc_capnp_echo_4k_{c1,c8}_*
#include <capnp/ez-rpc.h>
#include <kj/async.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/rpc_load.hpp"
#include "echo.capnp.h"

namespace {

class echo_impl final : public Echo::Server {
 protected:
  kj::Promise<void> echo(EchoContext context) override {
    context.getResults().setData(context.getParams().getData());
    return kj::READY_NOW;
  }
};

int serve(const std::string& port) {
  capnp::EzRpcServer server(kj::heap<echo_impl>(), "127.0.0.1", static_cast<unsigned>(std::stoul(port)));
  auto& wait = server.getWaitScope();
  server.getPort().wait(wait);
  std::printf("ready\n");
  std::fflush(stdout);
  kj::NEVER_DONE.wait(wait);
  return 0;
}

kj::ArrayPtr<const kj::byte> as_data(const std::string& s) {
  return {reinterpret_cast<const kj::byte*>(s.data()), s.size()};
}

bool matches(capnp::Data::Reader data, std::uint64_t n) {
  return rpc_load::answer_matches(data.begin(), data.size(), n);
}

/// One call; on its answer, the next (until the run's time is up).
kj::Promise<void> keep_calling(Echo::Client& echo, rpc_load::pipeline& load) {
  auto n = load.next();
  auto payload = rpc_load::payload_for(n);
  auto request = echo.echoRequest();
  request.setData(as_data(payload));
  auto started = rpc_load::clock::now();
  return request.send().then(
      [&echo, &load, n, started](capnp::Response<Echo::EchoResults>&& r) -> kj::Promise<void> {
        if (load.finished(n, started, matches(r.getData(), n))) return keep_calling(echo, load);
        return kj::READY_NOW;
      },
      [&echo, &load, n, started](kj::Exception&&) -> kj::Promise<void> {
        if (load.finished(n, started, false)) return keep_calling(echo, load);
        return kj::READY_NOW;
      });
}

int call(const std::string& port, double seconds) {
  capnp::EzRpcClient client("127.0.0.1", static_cast<unsigned>(std::stoul(port)));
  auto& wait = client.getWaitScope();
  auto echo = client.getMain<Echo>();
  auto duration = std::chrono::duration_cast<rpc_load::clock::duration>(std::chrono::duration<double>(seconds));
  auto c1 = rpc_load::run_sequential(
      [&](std::uint64_t n) {
        auto payload = rpc_load::payload_for(n);
        auto request = echo.echoRequest();
        request.setData(as_data(payload));
        try {
          auto r = request.send().wait(wait);
          return matches(r.getData(), n);
        } catch (const kj::Exception&) {
          return false;
        }
      },
      duration);
  rpc_load::report("rpc_capnp_echo_4k_c1", c1);
  rpc_load::pipeline load{duration};
  auto calls = kj::heapArrayBuilder<kj::Promise<void>>(rpc_load::outstanding_c8);
  for (int i = 0; i < rpc_load::outstanding_c8; ++i) calls.add(keep_calling(echo, load));
  kj::joinPromises(calls.finish()).wait(wait);
  auto c8 = load.result();
  rpc_load::report("rpc_capnp_echo_4k_c8", c8);
  return c1.errors == 0 && c8.errors == 0 && c1.calls > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = rpc_load::parse_peer_args(argc, argv);
  if (!args) {
    std::fputs("usage: capnp_echo serve --port N | capnp_echo call --port N [--seconds S]\n", stderr);
    return 2;
  }
  return args->mode == "serve" ? serve(args->port) : call(args->port, args->seconds);
}
