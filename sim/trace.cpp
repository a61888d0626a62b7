#include "sim/trace.hpp"

#include <cstdio>

#include <xxhash.h>

#include "runtime/rng.hpp"

namespace sluice::sim {

std::string format_time(sim_time t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%06llds", static_cast<long long>(us / 1'000'000),
                static_cast<long long>(us % 1'000'000));
  return text;
}

void trace::fold(sim_time at, std::uint64_t kind, std::uint64_t a, std::uint64_t b,
                 std::uint64_t c) {
  auto ns = static_cast<std::uint64_t>(at.time_since_epoch().count());
  std::uint64_t words[6] = {hash_, ns, kind, a, b, c};
  hash_ = XXH3_64bits(words, sizeof words);
  ++count_;
}

std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace sluice::sim
