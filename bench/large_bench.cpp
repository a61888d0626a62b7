// large_bench: big values on the owner's host. A 64 MiB put written in
// place (reserve, memcpy into the pool, commit) against a plain memcpy of
// the same size in the same run, and the cost of getting a view of a
// 4 KiB and a 64 MiB value (which should not depend on the size).
//
//   large_bench --sluice HOST:PORT [--rounds N]

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

void print_figure(const char* name, double value, const char* unit) {
  std::printf("figure %s %.4g %s\n", name, value, unit);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(bench_clock::time_point t0) {
  return std::chrono::duration<double>(bench_clock::now() - t0).count();
}

/// GB/s of memcpy between two warm 64 MiB buffers.
double memcpy_rate(const std::vector<std::byte>& source, int rounds) {
  std::vector<std::byte> dest(big_bytes, std::byte{1});
  std::vector<double> rates;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = bench_clock::now();
    std::memcpy(dest.data(), source.data(), big_bytes);
    rates.push_back(static_cast<double>(big_bytes) / seconds_since(t0) / 1e9);
  }
  return median(rates);
}

/// GB/s of a put written in place: reserve, memcpy, commit.
double put_rate(sluice::client& kv, const std::vector<std::byte>& source, int rounds, bool& ok) {
  std::vector<double> rates;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = bench_clock::now();
    auto w = kv.reserve("bench/big", big_bytes);
    if (!w) {
      std::fprintf(stderr, "large_bench: reserve: %s\n", w.error().to_string().c_str());
      ok = false;
      return 0;
    }
    std::memcpy(w->bytes().data(), source.data(), big_bytes);
    if (auto v = w->commit(); !v) {
      std::fprintf(stderr, "large_bench: commit: %s\n", v.error().to_string().c_str());
      ok = false;
      return 0;
    }
    rates.push_back(static_cast<double>(big_bytes) / seconds_since(t0) / 1e9);
  }
  return median(rates);
}

/// Median microseconds to get a view of `key` (dropped at once).
double view_us(sluice::client& kv, const std::string& key, int rounds, bool& ok) {
  std::vector<double> times;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = bench_clock::now();
    auto v = kv.get(key);
    times.push_back(seconds_since(t0) * 1e6);
    if (!v) {
      std::fprintf(stderr, "large_bench: get %s: %s\n", key.c_str(), v.error().to_string().c_str());
      ok = false;
      return 0;
    }
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  std::string address;
  int rounds = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--sluice") address = argv[i + 1];
    if (flag == "--rounds") rounds = std::max(3, std::atoi(argv[i + 1]));
  }
  if (address.empty()) {
    std::fputs("usage: large_bench --sluice HOST:PORT [--rounds N]\n", stderr);
    return 2;
  }
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  options.timeout = std::chrono::seconds{10};
  auto kv = sluice::client::connect(address, options);
  if (!kv) {
    std::fprintf(stderr, "large_bench: %s\n", kv.error().to_string().c_str());
    return 1;
  }
  std::vector<std::byte> source(big_bytes);
  for (std::size_t i = 0; i < big_bytes; ++i) source[i] = static_cast<std::byte>(i * 31);

  bool ok = true;
  put_rate(**kv, source, 3, ok);  // warm: the pool's pages get memory
  double copy = memcpy_rate(source, rounds);
  double put = put_rate(**kv, source, rounds, ok);
  if (!(*kv)->put("bench/small", std::string(4096, 's'))) ok = false;
  double small_view = view_us(**kv, "bench/small", rounds * 10, ok);
  double big_view = view_us(**kv, "bench/big", rounds * 10, ok);
  if (!ok) return 1;
  std::printf("64 MiB: memcpy %.2f GB/s, put written in place %.2f GB/s\n", copy, put);
  std::printf("get as a view: 4 KiB %.2f us, 64 MiB %.2f us\n", small_view, big_view);
  print_figure("memcpy_64m_gb_per_s", copy, "GB/s");
  print_figure("kv_put_64m_gb_per_s", put, "GB/s");
  print_figure("kv_put_64m_vs_memcpy", put / copy, "ratio");
  print_figure("kv_get_view_4k_us", small_view, "us");
  print_figure("kv_get_view_64m_us", big_view, "us");
  print_figure("kv_get_view_64m_vs_4k", big_view / small_view, "ratio");
  return 0;
}
