// interrupt_scope: the innermost scope of each thread, in a thread-local
// pointer the library's waits read (calls.cpp, calls.hpp).
#include "sluice/interrupt.hpp"

#include <utility>

namespace sluice {
namespace {
thread_local const interrupt_scope* innermost = nullptr;
}  // namespace

interrupt_scope::interrupt_scope(std::function<bool()> check, std::chrono::milliseconds every)
    : check_(std::move(check)), every_(every.count() > 0 ? every : default_every), outer_(innermost) {
  innermost = this;
}

interrupt_scope::~interrupt_scope() { innermost = outer_; }

const interrupt_scope* interrupt_scope::current() noexcept { return innermost; }

bool interrupt_scope::interrupted() const noexcept {
  if (!check_) return false;
  try {
    return check_();
  } catch (...) {
    return false;
  }
}

}  // namespace sluice
