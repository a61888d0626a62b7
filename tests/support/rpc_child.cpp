// A serving process for multi-process RPC tests. Connects to its owner
// through shared memory, serves one name, prints "ready CLIENT_ID" on
// stdout, and serves until it is killed:
//
//   rpc_child ADDRESS NAME who     answers {"id": its client id}
//   rpc_child ADDRESS NAME echo    answers its arguments' "text" field
//   rpc_child ADDRESS NAME hang    takes every call and never answers it;
//                                  prints "took" for each

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/rpc.hpp"

namespace {

sluice::result<sluice::dict_builder> one_string(std::string_view field, std::string_view text) {
  sluice::dict_builder out;
  if (auto ok = out.add_string(field, text); !ok) return ok.error();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  std::string address = argv[1], name = argv[2], mode = argv[3];
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  options.name = "rpc-child-" + mode;
  options.keepalive = std::chrono::milliseconds{200};
  auto c = sluice::client::connect(address, options);
  if (!c) {
    std::printf("bad connect: %s\n", c.error().to_string().c_str());
    return 1;
  }
  auto& rpc = (*c)->rpc();
  std::mutex mutex;
  std::vector<sluice::rpc_promise> held;  // hang: kept until the process dies
  sluice::result<void> served = sluice::fail(sluice::errc::invalid_argument, "unknown mode " + mode);
  if (mode == "who") {
    auto id = rpc.id();
    served = rpc.serve(name, [id](const sluice::rpc_request&) { return one_string("id", id); });
  } else if (mode == "echo") {
    served = rpc.serve(name, [](const sluice::rpc_request& r) -> sluice::result<sluice::dict_builder> {
      auto* f = r.args().find("text");
      if (f == nullptr) return sluice::fail(sluice::errc::invalid_argument, "no 'text' argument");
      auto text = f->as_string();
      if (!text) return text.error();
      return one_string("text", *text);
    });
  } else if (mode == "hang") {
    served = rpc.serve_async(name, [&](sluice::rpc_request, sluice::rpc_promise p) {
      std::lock_guard guard{mutex};
      held.push_back(std::move(p));
      std::printf("took\n");
      std::fflush(stdout);
    });
  }
  if (!served) {
    std::printf("bad serve: %s\n", served.error().to_string().c_str());
    return 1;
  }
  std::printf("ready %s\n", rpc.id().c_str());
  std::fflush(stdout);
  ::pause();
  return 0;
}
