// The randomness seam. Role code draws every random choice from a node's
// rng, seeded from the node's seed: in the simulator the seed derives from
// the run's root seed, so one seed replays one run. Never use
// std::random_device or a global generator in role code.
#pragma once

#include <cstdint>

namespace sluice {

/// xoshiro256** seeded through splitmix64. Small, fast, and the same
/// sequence for the same seed on every platform.
class rng {
 public:
  explicit rng(std::uint64_t seed) noexcept;

  std::uint64_t next() noexcept;
  /// Uniform in [0, bound). REQUIRES: bound > 0.
  std::uint64_t uniform(std::uint64_t bound) noexcept;
  /// True with probability numerator / denominator.
  bool chance(std::uint64_t numerator, std::uint64_t denominator) noexcept;
  /// An independent stream derived from this one's seed and `stream`,
  /// without consuming from this generator.
  rng fork(std::uint64_t stream) const noexcept;

 private:
  std::uint64_t seed_;
  std::uint64_t s_[4];
};

/// splitmix64: a seed-spreading step used to derive seeds from seeds.
std::uint64_t mix_seed(std::uint64_t x) noexcept;

/// A seed from the operating system's entropy. Only for code that builds
/// nodes (the launcher, the embedding API); never for role code.
std::uint64_t entropy_seed();

}  // namespace sluice
