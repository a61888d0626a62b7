// A serving process for multi-process RPC tests. Connects to its owner
// through shared memory, serves one name, prints "ready CLIENT_ID" on
// stdout, and serves until it is killed:
//
//   rpc_child ADDRESS NAME who     answers {"id": its client id}
//   rpc_child ADDRESS NAME echo    answers its arguments' "text" field
//   rpc_child ADDRESS NAME hang    takes every call and never answers it;
//                                  prints "took" for each
//   rpc_child ADDRESS NAME count   serves a stream of {"seq": 0..n-1} (n
//                                  from the "n" argument; 0: endless, an
//                                  item each 2 ms); prints "streaming"
//   rpc_child ADDRESS NAME reader  calls the stream NAME, reads one item,
//                                  prints "read", and reads no more

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
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
  std::optional<sluice::rpc_stream> reading;  // reader: kept unread until the process dies
  if (mode == "count") {
    served = rpc.serve_stream(name, [](sluice::rpc_request req, sluice::rpc_stream_writer w) {
      auto* f = req.args().find("n");
      std::int64_t n = f != nullptr && f->as_int64() ? *f->as_int64() : 0;
      std::printf("streaming\n");
      std::fflush(stdout);
      std::thread([w = std::move(w), n]() mutable {
        for (std::int64_t i = 0; n == 0 || i < n; ++i) {
          sluice::dict_builder item;
          (void)item.add_int64("seq", i);
          if (!w.write(item)) return;
          if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds{2});
        }
        w.finish();
      }).detach();
    });
  } else if (mode == "reader") {
    reading.emplace(rpc.call_stream(sluice::rpc_target::any(), name, {}, {.timeout = std::chrono::seconds{60}, .window = 2}));
    auto first = reading->next();
    if (!first || !*first) {
      std::printf("bad read: %s\n", first ? "the end" : first.error().to_string().c_str());
      return 1;
    }
    std::printf("read\n");
    std::fflush(stdout);
    ::pause();
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
