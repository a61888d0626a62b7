// A client process for multi-process tests. Prints "ready" on stdout when
// it has done its setup, then does what it was asked:
//
//   kv_child ADDRESS reserve KEY SIZE    reserve, write half, wait to be killed
//   kv_child ADDRESS hold KEY            get a view of KEY and hold it forever
//   kv_child ADDRESS pin KEY             pin KEY (for its session) and wait
//   kv_child ADDRESS hammer ID OPS SIZE  put/get/verify OPS values of its own;
//                                        prints "ok N" or "bad ..." and exits

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "sluice/client.hpp"

namespace {

std::string pattern(const std::string& key, std::size_t size, std::uint64_t round) {
  std::string s(size, '\0');
  std::uint64_t x = std::hash<std::string>{}(key) ^ (round * 0x9e3779b97f4a7c15ULL);
  for (auto& c : s) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

int hammer(sluice::client& kv, const std::string& id, int ops, std::size_t size) {
  for (int i = 0; i < ops; ++i) {
    auto key = "child/" + id + "/" + std::to_string(i % 8);
    auto value = pattern(key, size, static_cast<std::uint64_t>(i));
    if (auto put = kv.put(key, value); !put) {
      std::printf("bad put %s: %s\n", key.c_str(), put.error().to_string().c_str());
      return 1;
    }
    auto got = kv.get(key);
    if (!got || got->str() != value) {
      std::printf("bad get %s: %s\n", key.c_str(), got ? "wrong bytes" : got.error().to_string().c_str());
      return 1;
    }
  }
  std::printf("ok %d\n", ops);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string address = argv[1], action = argv[2];
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  // Often enough for owners that end silent sessions quickly (tests).
  options.keepalive = std::chrono::milliseconds{200};
  auto kv = sluice::client::connect(address, options);
  if (!kv) {
    std::printf("bad connect: %s\n", kv.error().to_string().c_str());
    return 1;
  }
  if (action == "reserve" && argc == 5) {
    auto w = (*kv)->reserve(argv[3], std::stoull(argv[4]));
    if (!w) {
      std::printf("bad reserve: %s\n", w.error().to_string().c_str());
      return 1;
    }
    std::memset(w->bytes().data(), 'x', w->bytes().size() / 2);
    std::printf("ready\n");
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "hold" && argc == 4) {
    auto v = (*kv)->get(argv[3]);
    if (!v) {
      std::printf("bad get: %s\n", v.error().to_string().c_str());
      return 1;
    }
    std::printf("ready %zu\n", v->size());
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "pin" && argc == 4) {
    auto v = (*kv)->pin(argv[3]);
    if (!v) {
      std::printf("bad pin: %s\n", v.error().to_string().c_str());
      return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "hammer" && argc == 6) {
    std::printf("ready\n");
    std::fflush(stdout);
    return hammer(**kv, argv[3], std::stoi(argv[4]), std::stoull(argv[5]));
  }
  return 2;
}
