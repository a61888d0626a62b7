#include "runtime/assert.hpp"

#include <cstdio>
#include <cstdlib>

namespace sluice::detail {

void assert_failed(const char* condition, const char* file, int line) noexcept {
  std::fprintf(stderr, "sluice: assertion failed: %s (%s:%d)\n", condition, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace sluice::detail
