// Assertions that stay on in release builds. Use them for invariants whose
// violation means memory or data corruption; expected failures are errors.
#pragma once

namespace sluice::detail {
[[noreturn]] void assert_failed(const char* condition, const char* file, int line) noexcept;
}  // namespace sluice::detail

#define SLUICE_ASSERT(condition)                                        \
  do {                                                                  \
    if (!(condition)) [[unlikely]] {                                    \
      ::sluice::detail::assert_failed(#condition, __FILE__, __LINE__);  \
    }                                                                   \
  } while (false)
