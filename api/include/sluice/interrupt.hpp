// Interrupting a blocking call: while an interrupt_scope lives on a
// thread, every call that thread makes into Sluice and waits on looks at
// a check of the caller's every so often, and gives up when it says so.
//
//   sluice::interrupt_scope scope{[] { return shutting_down.load(); }};
//   auto v = client.get("key");  // errc::cancelled once shutting_down is set
//
// The check runs on the waiting thread, only once a wait has lasted
// `every` (a call answered sooner never runs it). A call it ends returns
// `cancelled`; an answer that comes later is dropped (a value it carried
// is released), and what the call asked for may still happen: a put may
// commit, a handler may run to its end. The Python module uses this to
// turn Ctrl-C into KeyboardInterrupt.
#pragma once

#include <chrono>
#include <functional>

namespace sluice {

class interrupt_scope {
 public:
  /// How often a waiting call runs the check unless told otherwise.
  static constexpr std::chrono::milliseconds default_every{50};

  /// Installs `check` for this thread until the scope ends; scopes nest
  /// (the innermost one is asked).
  explicit interrupt_scope(std::function<bool()> check, std::chrono::milliseconds every = default_every);
  ~interrupt_scope();
  interrupt_scope(const interrupt_scope&) = delete;
  interrupt_scope& operator=(const interrupt_scope&) = delete;

  /// The scope in force on this thread, or null.
  static const interrupt_scope* current() noexcept;
  /// Runs the check (false when it throws).
  bool interrupted() const noexcept;
  std::chrono::milliseconds every() const noexcept { return every_; }

 private:
  std::function<bool()> check_;
  std::chrono::milliseconds every_;
  const interrupt_scope* outer_;
};

}  // namespace sluice
