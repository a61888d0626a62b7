// result<T>: a value or an error. Expected failures are values, not
// exceptions; success costs nothing beyond holding T.
//
// Part of the public vocabulary (standard library only).
#pragma once

#include <cstdlib>
#include <cstdio>
#include <utility>
#include <variant>

#include "sluice/error.hpp"

namespace sluice {

namespace detail {
[[noreturn]] inline void result_misuse(const char* what) {
  // Reading the wrong side of a result is a programmer error; stop loudly.
  std::fprintf(stderr, "sluice: result misuse: %s\n", what);
  std::abort();
}
}  // namespace detail

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(sluice::error err) : state_(std::in_place_index<1>, std::move(err)) {}  // NOLINT

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { check_value(); return std::get<0>(state_); }
  const T& value() const& { check_value(); return std::get<0>(state_); }
  T&& value() && { check_value(); return std::get<0>(std::move(state_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const sluice::error& error() const& {
    if (ok()) detail::result_misuse("error() called on a successful result");
    return std::get<1>(state_);
  }
  sluice::error&& error() && {
    if (ok()) detail::result_misuse("error() called on a successful result");
    return std::get<1>(std::move(state_));
  }

  /// The code: errc::ok on success.
  errc code() const noexcept { return ok() ? errc::ok : std::get<1>(state_).code(); }

 private:
  void check_value() const {
    if (!ok()) detail::result_misuse(std::get<1>(state_).to_string().c_str());
  }
  std::variant<T, sluice::error> state_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(sluice::error err) : error_(std::move(err)), failed_(true) {}  // NOLINT

  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }

  const sluice::error& error() const& {
    if (ok()) detail::result_misuse("error() called on a successful result");
    return error_;
  }
  errc code() const noexcept { return ok() ? errc::ok : error_.code(); }

 private:
  sluice::error error_{errc::internal, {}};
  bool failed_ = false;
};

/// Shorthand for building failures: `return fail(errc::not_found, "...")`.
inline sluice::error fail(errc code, std::string message) {
  return sluice::error{code, std::move(message)};
}

}  // namespace sluice
