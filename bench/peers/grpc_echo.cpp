// grpc_echo: gRPC C++ (Debian's libgrpc++) as a peer in `bench/run rpc`.
//
//   grpc_echo serve --port N        a synchronous server (the library's
//                                   default threads); prints "ready"
//   grpc_echo call --port N [--seconds S]
//       4 KiB echo like rpc_bench: one blocking call at a time (c1), then
//       8 in flight on one completion queue driven by one thread (c8);
//       figure lines rpc_grpc_echo_4k_{c1,c8}_*
//
// Plain library defaults on both sides: nothing here tunes gRPC either way.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/rpc_load.hpp"
#include "echo.grpc.pb.h"

namespace {

using sluice_bench::Echo;
using sluice_bench::EchoMessage;

class echo_service final : public Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const EchoMessage* request, EchoMessage* reply) override {
    reply->set_data(request->data());
    return grpc::Status::OK;
  }
};

int serve(const std::string& port) {
  echo_service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + port, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "grpc_echo: cannot listen on port %s\n", port.c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  server->Wait();
  return 0;
}

bool matches(const EchoMessage& reply, std::uint64_t n) {
  return rpc_load::answer_matches(reply.data().data(), reply.data().size(), n);
}

/// One call in flight on the completion queue.
struct slot {
  std::uint64_t n = 0;
  rpc_load::clock::time_point started;
  std::unique_ptr<grpc::ClientContext> context;
  EchoMessage reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<EchoMessage>> reader;
};

void start(Echo::Stub& stub, grpc::CompletionQueue& cq, slot& s, rpc_load::pipeline& load) {
  s.n = load.next();
  EchoMessage request;
  request.set_data(rpc_load::payload_for(s.n));
  s.context = std::make_unique<grpc::ClientContext>();
  s.started = rpc_load::clock::now();
  s.reader = stub.AsyncEcho(s.context.get(), request, &cq);
  s.reader->Finish(&s.reply, &s.status, &s);
}

rpc_load::summary pipelined(Echo::Stub& stub, rpc_load::clock::duration duration) {
  grpc::CompletionQueue cq;
  rpc_load::pipeline load{duration};
  std::vector<slot> slots(rpc_load::outstanding_c8);
  for (auto& s : slots) start(stub, cq, s, load);
  int in_flight = rpc_load::outstanding_c8;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && cq.Next(&tag, &ok)) {
    auto& s = *static_cast<slot*>(tag);
    --in_flight;
    bool good = ok && s.status.ok() && matches(s.reply, s.n);
    if (load.finished(s.n, s.started, good)) {
      start(stub, cq, s, load);
      ++in_flight;
    }
  }
  return load.result();
}

int call(const std::string& port, double seconds) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials());
  auto stub = Echo::NewStub(channel);
  auto duration = std::chrono::duration_cast<rpc_load::clock::duration>(std::chrono::duration<double>(seconds));
  auto c1 = rpc_load::run_sequential(
      [&stub](std::uint64_t n) {
        EchoMessage request, reply;
        request.set_data(rpc_load::payload_for(n));
        grpc::ClientContext context;
        return stub->Echo(&context, request, &reply).ok() && matches(reply, n);
      },
      duration);
  rpc_load::report("rpc_grpc_echo_4k_c1", c1);
  auto c8 = pipelined(*stub, duration);
  rpc_load::report("rpc_grpc_echo_4k_c8", c8);
  return c1.errors == 0 && c8.errors == 0 && c1.calls > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = rpc_load::parse_peer_args(argc, argv);
  if (!args) {
    std::fputs("usage: grpc_echo serve --port N | grpc_echo call --port N [--seconds S]\n", stderr);
    return 2;
  }
  return args->mode == "serve" ? serve(args->port) : call(args->port, args->seconds);
}
