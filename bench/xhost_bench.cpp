// xhost_bench: a 64 MiB value read across hosts. It puts the value through
// the owner of another host (over TCP), then reads it through the owner of
// its own host (over shared memory) again and again; that owner keeps no
// copy, so every read moves the 64 MiB from the other host's owner to this
// one's pool. bench/run xhost runs it in network namespaces joined by veth
// pairs, next to iperf3 over the same pair, once over the direct path and
// once with the direct path cut (through a relay).
//
//   xhost_bench --put HOST:PORT --get HOST:PORT --label NAME [--seconds S] [--no-put]
//
// After two warm-up reads it reads for S seconds (default 3; at least three
// reads), each timed, then every byte it returned checked untimed.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/client.hpp"

namespace {

using bench_clock = std::chrono::steady_clock;
constexpr std::size_t big_bytes = 64u << 20;
constexpr const char* key = "xhost/big";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct flags {
  std::string put_at;
  std::string get_at;
  std::string label = "direct";
  double seconds = 3;
  bool put = true;
};

flags parse(int argc, char** argv) {
  flags f;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string{argv[++i]} : std::string{}; };
    if (flag == "--put") f.put_at = next();
    if (flag == "--get") f.get_at = next();
    if (flag == "--label") f.label = next();
    if (flag == "--seconds") f.seconds = std::atof(next().c_str());
    if (flag == "--no-put") f.put = false;
  }
  return f;
}

std::unique_ptr<sluice::client> connect(const std::string& address, sluice::client_transport how) {
  sluice::client_options options;
  options.transport = how;
  options.timeout = std::chrono::seconds{30};
  auto c = sluice::client::connect(address, options);
  if (!c) {
    std::fprintf(stderr, "xhost_bench: %s: %s\n", address.c_str(), c.error().to_string().c_str());
    return nullptr;
  }
  return std::move(*c);
}

}  // namespace

int main(int argc, char** argv) {
  auto f = parse(argc, argv);
  if (f.get_at.empty() || (f.put && f.put_at.empty()) || !(f.seconds > 0 && f.seconds <= 3600)) {
    std::fputs("usage: xhost_bench --put HOST:PORT --get HOST:PORT --label NAME [--seconds S] [--no-put]\n", stderr);
    return 2;
  }
  std::vector<std::byte> expected(big_bytes);
  for (std::size_t i = 0; i < big_bytes; ++i) expected[i] = static_cast<std::byte>(i * 31 + (i >> 12));
  if (f.put) {
    auto remote = connect(f.put_at, sluice::client_transport::tcp);
    if (!remote) return 1;
    if (auto v = remote->put(key, expected); !v) {
      std::fprintf(stderr, "xhost_bench: put: %s\n", v.error().to_string().c_str());
      return 1;
    }
  }
  auto local = connect(f.get_at, sluice::client_transport::shared_memory);
  if (!local) return 1;
  std::vector<double> rates;
  auto run = std::chrono::duration_cast<bench_clock::duration>(std::chrono::duration<double>(f.seconds));
  auto until = bench_clock::time_point::max();
  for (int i = 0; rates.size() < 3 || bench_clock::now() < until; ++i) {
    // The first two warm the path (links, pool pages) and are not counted.
    if (i == 2) until = bench_clock::now() + run;
    auto t0 = bench_clock::now();
    auto v = local->get(key);
    auto seconds = std::chrono::duration<double>(bench_clock::now() - t0).count();
    if (!v || v->size() != big_bytes) {
      std::fprintf(stderr, "xhost_bench: get: %s\n", v ? "wrong size" : v.error().to_string().c_str());
      return 1;
    }
    if (i >= 2) rates.push_back(static_cast<double>(big_bytes) / seconds / 1e9);
    // Untimed: every byte that crossed is one that was put.
    auto got = v->bytes();
    if (std::memcmp(got.data(), expected.data(), big_bytes) != 0) {
      auto at = std::mismatch(got.begin(), got.end(), expected.begin()).first - got.begin();
      std::fprintf(stderr, "xhost_bench: byte %td of the value read differs from what was put\n", at);
      return 1;
    }
  }
  auto rate = median(rates);
  std::printf("64 MiB get across hosts (%s): median %.3f GB/s over %zu reads\n", f.label.c_str(), rate, rates.size());
  std::printf("figure xhost_%s_get_64m_gb_per_s %.4g GB/s\n", f.label.c_str(), rate);
  return 0;
}
