// large_bench: big values on the owner's host. A 64 MiB put written in
// place (reserve, memcpy into the pool, commit) against a plain memcpy of
// the same size in the same run, and the cost of getting a view of a
// 4 KiB and a 64 MiB value (which should not depend on the size).
//
//   large_bench --sluice HOST:PORT [--seconds S]
//
// Each measurement runs for S seconds (default 1) and reports its median.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
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

/// GB/s of memcpy between two warm 64 MiB buffers, for `run` (median).
double memcpy_rate(const std::vector<std::byte>& source, bench_clock::duration run) {
  std::vector<std::byte> dest(big_bytes, std::byte{1});
  std::vector<double> rates;
  for (auto until = bench_clock::now() + run; rates.empty() || bench_clock::now() < until;) {
    auto t0 = bench_clock::now();
    std::memcpy(dest.data(), source.data(), big_bytes);
    rates.push_back(static_cast<double>(big_bytes) / seconds_since(t0) / 1e9);
  }
  return median(rates);
}

/// GB/s of a put written in place (reserve, memcpy, commit), for `run`
/// (median); at least `at_least` puts.
double put_rate(sluice::client& kv, const std::vector<std::byte>& source, bench_clock::duration run, bool& ok,
                std::size_t at_least = 1) {
  std::vector<double> rates;
  for (auto until = bench_clock::now() + run; rates.size() < at_least || bench_clock::now() < until;) {
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

/// Gets timed back to back before their views are checked.
constexpr std::size_t view_batch = 16;

/// Median microseconds to get a view of `key`, for `run`: batches of
/// gets, each timed, then every byte of each view checked against
/// `expected` (outside the timing, so the check does not cool the caches
/// the next get uses).
double view_us(sluice::client& kv, const std::string& key, std::span<const std::byte> expected,
               bench_clock::duration run, bool& ok) {
  std::vector<double> times;
  std::vector<sluice::value> views;
  for (auto until = bench_clock::now() + run; times.empty() || bench_clock::now() < until;) {
    views.clear();
    for (std::size_t i = 0; i < view_batch; ++i) {
      auto t0 = bench_clock::now();
      auto v = kv.get(key);
      times.push_back(seconds_since(t0) * 1e6);
      if (!v) {
        std::fprintf(stderr, "large_bench: get %s: %s\n", key.c_str(), v.error().to_string().c_str());
        ok = false;
        return 0;
      }
      views.push_back(std::move(*v));
    }
    for (auto& v : views) {
      auto got = v.bytes();
      if (got.size() != expected.size() || std::memcmp(got.data(), expected.data(), got.size()) != 0) {
        std::fprintf(stderr, "large_bench: get %s: wrong bytes (%zu)\n", key.c_str(), got.size());
        ok = false;
        return 0;
      }
    }
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  std::string address;
  double seconds = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--sluice") address = argv[i + 1];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
  }
  if (address.empty() || !(seconds > 0 && seconds <= 3600)) {
    std::fputs("usage: large_bench --sluice HOST:PORT [--seconds S]\n", stderr);
    return 2;
  }
  auto run = std::chrono::duration_cast<bench_clock::duration>(std::chrono::duration<double>(seconds));
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
  put_rate(**kv, source, bench_clock::duration::zero(), ok, 3);  // warm: the pool's pages get memory
  double copy = memcpy_rate(source, run);
  double put = put_rate(**kv, source, run, ok);
  std::vector<std::byte> small(4096, std::byte{'s'});
  if (!(*kv)->put("bench/small", small)) ok = false;
  double small_view = view_us(**kv, "bench/small", small, run, ok);
  double big_view = view_us(**kv, "bench/big", source, run, ok);
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
