#include "runtime/rng.hpp"

#include <random>

#include "runtime/assert.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

std::uint64_t mix_seed(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

rng::rng(std::uint64_t seed) noexcept : seed_(seed) {
  std::uint64_t x = seed;
  for (auto& word : s_) {
    x = mix_seed(x);
    word = x;
  }
}

std::uint64_t rng::next() noexcept {
  std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t rng::uniform(std::uint64_t bound) noexcept {
  SLUICE_ASSERT(bound > 0);
  // Rejection sampling removes the modulo bias.
  std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
  std::uint64_t x;
  do {
    x = next();
  } while (x >= limit);
  return x % bound;
}

bool rng::chance(std::uint64_t numerator, std::uint64_t denominator) noexcept {
  if (numerator == 0) return false;
  if (numerator >= denominator) return true;
  return uniform(denominator) < numerator;
}

rng rng::fork(std::uint64_t stream) const noexcept {
  return rng{mix_seed(seed_ ^ mix_seed(stream + 1))};
}

std::uint64_t entropy_seed() {
  std::random_device device;
  std::uint64_t seed = (std::uint64_t{device()} << 32) ^ device();
  return seed == 0 ? 1 : seed;
}

}  // namespace sluice
