#include "sluice/error.hpp"
#include "sluice/result.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>

using sluice::errc;

TEST_CASE("error: every code keeps its pinned number") {
  // These numbers travel on the wire; a failure here is a protocol break.
  CHECK(static_cast<std::uint16_t>(errc::ok) == 0);
  CHECK(static_cast<std::uint16_t>(errc::not_found) == 1);
  CHECK(static_cast<std::uint16_t>(errc::timeout) == 2);
  CHECK(static_cast<std::uint16_t>(errc::unavailable) == 3);
  CHECK(static_cast<std::uint16_t>(errc::no_capacity) == 4);
  CHECK(static_cast<std::uint16_t>(errc::conflict) == 5);
  CHECK(static_cast<std::uint16_t>(errc::invalid_argument) == 6);
  CHECK(static_cast<std::uint16_t>(errc::permission_denied) == 7);
  CHECK(static_cast<std::uint16_t>(errc::aborted) == 8);
  CHECK(static_cast<std::uint16_t>(errc::internal) == 9);
  CHECK(static_cast<std::uint16_t>(errc::overloaded) == 10);
  CHECK(static_cast<std::uint16_t>(errc::protocol) == 11);
  CHECK(static_cast<std::uint16_t>(errc::cancelled) == 12);
  CHECK(static_cast<std::uint16_t>(errc::handler_failed) == 13);
  CHECK(sluice::errc_last == errc::handler_failed);
}

TEST_CASE("error: every code has its documented name and a description") {
  CHECK(sluice::to_string(errc::ok) == "ok");
  CHECK(sluice::to_string(errc::not_found) == "not_found");
  CHECK(sluice::to_string(errc::timeout) == "timeout");
  CHECK(sluice::to_string(errc::unavailable) == "unavailable");
  CHECK(sluice::to_string(errc::no_capacity) == "no_capacity");
  CHECK(sluice::to_string(errc::conflict) == "conflict");
  CHECK(sluice::to_string(errc::invalid_argument) == "invalid_argument");
  CHECK(sluice::to_string(errc::permission_denied) == "permission_denied");
  CHECK(sluice::to_string(errc::aborted) == "aborted");
  CHECK(sluice::to_string(errc::internal) == "internal");
  CHECK(sluice::to_string(errc::overloaded) == "overloaded");
  CHECK(sluice::to_string(errc::protocol) == "protocol");
  CHECK(sluice::to_string(errc::cancelled) == "cancelled");
  CHECK(sluice::to_string(errc::handler_failed) == "handler_failed");
  for (std::uint16_t n = 0; n <= static_cast<std::uint16_t>(sluice::errc_last); ++n) {
    auto code = static_cast<errc>(n);
    CHECK(sluice::to_string(code) != "unknown");
    CHECK_FALSE(sluice::describe(code).empty());
    CHECK(sluice::describe(code) != "unknown error code");
  }
}

TEST_CASE("error: a wire number maps back to its code") {
  CHECK(sluice::errc_from_wire(0) == errc::ok);
  for (std::uint16_t n = 1; n <= static_cast<std::uint16_t>(sluice::errc_last); ++n) {
    CHECK(sluice::errc_from_wire(n) == static_cast<errc>(n));
  }
}

TEST_CASE("error: an unknown wire number becomes internal, never success") {
  CHECK(sluice::errc_from_wire(13) == errc::handler_failed);
  CHECK(sluice::errc_from_wire(14) == errc::internal);
  CHECK(sluice::errc_from_wire(999) == errc::internal);
  CHECK(sluice::errc_from_wire(0xffff) == errc::internal);
}

TEST_CASE("error: an error carries its code and message and prints both") {
  sluice::error e{errc::not_found, "key 'a' has no committed version"};
  CHECK(e.code() == errc::not_found);
  CHECK(e.message() == "key 'a' has no committed version");
  CHECK(e.to_string() == "not_found: key 'a' has no committed version");
  CHECK(sluice::error{errc::timeout, ""}.to_string() == "timeout");
  CHECK(e == sluice::fail(errc::not_found, "key 'a' has no committed version"));
  CHECK_FALSE(e == sluice::fail(errc::not_found, "other"));
  CHECK_FALSE(e == sluice::fail(errc::internal, "key 'a' has no committed version"));
}

TEST_CASE("result: a successful result holds its value and reports ok") {
  sluice::result<int> r = 42;
  CHECK(r.ok());
  CHECK(static_cast<bool>(r));
  CHECK(r.code() == errc::ok);
  CHECK(r.value() == 42);
  CHECK(*r == 42);
  *r = 7;
  CHECK(r.value() == 7);

  sluice::result<std::string> s = std::string("abc");
  CHECK(s->size() == 3);
}

TEST_CASE("result: a failed result holds its error and reports the code") {
  sluice::result<int> r = sluice::fail(errc::no_capacity, "pool is full");
  CHECK_FALSE(r.ok());
  CHECK_FALSE(static_cast<bool>(r));
  CHECK(r.code() == errc::no_capacity);
  CHECK(r.error().message() == "pool is full");
  sluice::error moved = std::move(r).error();
  CHECK(moved.code() == errc::no_capacity);
}

TEST_CASE("result: a value can be moved out of a result") {
  sluice::result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  std::unique_ptr<int> p = std::move(r).value();
  REQUIRE(p != nullptr);
  CHECK(*p == 5);
}

TEST_CASE("result: result<void> is ok by default and carries an error when failed") {
  sluice::result<void> ok;
  CHECK(ok.ok());
  CHECK(static_cast<bool>(ok));
  CHECK(ok.code() == errc::ok);

  sluice::result<void> failed = sluice::fail(errc::aborted, "stopped");
  CHECK_FALSE(failed.ok());
  CHECK(failed.code() == errc::aborted);
  CHECK(failed.error().to_string() == "aborted: stopped");
}
