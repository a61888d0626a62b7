#include "runtime/node_id.hpp"

#include <doctest/doctest.h>

using sluice::node_id;

TEST_CASE("node_id: the text form is 16 lowercase hex digits") {
  CHECK(node_id{0xa1}.to_string() == "00000000000000a1");
  CHECK(node_id{0xdeadbeefcafef00dULL}.to_string() == "deadbeefcafef00d");
  CHECK(node_id{~0ULL}.to_string() == "ffffffffffffffff");
}

TEST_CASE("node_id: the text form parses back to the same id") {
  for (std::uint64_t v : {1ULL, 0xa1ULL, 0x123456789abcdefULL, ~0ULL}) {
    auto parsed = node_id::parse(node_id{v}.to_string());
    REQUIRE(parsed.has_value());
    CHECK(*parsed == node_id{v});
  }
  auto short_form = node_id::parse("a1");
  REQUIRE(short_form.has_value());
  CHECK(short_form->value == 0xa1);
  auto upper = node_id::parse("DEADBEEF");
  REQUIRE(upper.has_value());
  CHECK(upper->value == 0xdeadbeef);
}

TEST_CASE("node_id: bad text is rejected") {
  CHECK_FALSE(node_id::parse("").has_value());
  CHECK_FALSE(node_id::parse("0").has_value());
  CHECK_FALSE(node_id::parse("0000000000000000").has_value());
  CHECK_FALSE(node_id::parse("00000000000000001").has_value());  // 17 digits
  CHECK_FALSE(node_id::parse("xyz").has_value());
  CHECK_FALSE(node_id::parse("12g4").has_value());
  CHECK_FALSE(node_id::parse(" a1").has_value());
  CHECK_FALSE(node_id::parse("a1 ").has_value());
  CHECK_FALSE(node_id::parse("-1").has_value());
  CHECK_FALSE(node_id::parse("0xa1").has_value());
}

TEST_CASE("node_id: zero is the invalid id and ids order by value") {
  CHECK_FALSE(node_id{}.valid());
  CHECK(node_id{5}.valid());
  CHECK(node_id{1} < node_id{2});
  CHECK(node_id{3} == node_id{3});
}

TEST_CASE("node_id: every role has its name") {
  CHECK(sluice::to_string(sluice::role::unknown) == "unknown");
  CHECK(sluice::to_string(sluice::role::master) == "master");
  CHECK(sluice::to_string(sluice::role::owner) == "owner");
  CHECK(sluice::to_string(sluice::role::client) == "client");
}
