#include "runtime/units.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace std::chrono_literals;

namespace {

/// The error message of a failed parse; fails the test if it succeeded.
template <class T>
std::string failure(const sluice::result<T>& r) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == sluice::errc::invalid_argument);
  return r.error().message();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("units: a size without a unit is a number of bytes") {
  CHECK(*sluice::parse_size("0") == 0);
  CHECK(*sluice::parse_size("17") == 17);
  CHECK(*sluice::parse_size("17B") == 17);
}

TEST_CASE("units: binary size units are powers of 1024") {
  CHECK(*sluice::parse_size("1KiB") == 1024);
  CHECK(*sluice::parse_size("512MiB") == 512ULL << 20);
  CHECK(*sluice::parse_size("4GiB") == 4ULL << 30);
  CHECK(*sluice::parse_size("2TiB") == 2ULL << 40);
}

TEST_CASE("units: decimal size units are powers of 1000") {
  CHECK(*sluice::parse_size("3KB") == 3'000);
  CHECK(*sluice::parse_size("3MB") == 3'000'000);
  CHECK(*sluice::parse_size("3GB") == 3'000'000'000ULL);
  CHECK(*sluice::parse_size("3TB") == 3'000'000'000'000ULL);
}

TEST_CASE("units: one space may separate a size from its unit") {
  CHECK(*sluice::parse_size("512 MiB") == 512ULL << 20);
  CHECK(*sluice::parse_size("17 B") == 17);
  CHECK(contains(failure(sluice::parse_size("512  MiB")), "unknown unit"));
  CHECK(contains(failure(sluice::parse_size("512 ")), "a unit must follow the space"));
}

TEST_CASE("units: an empty size is rejected") {
  CHECK(contains(failure(sluice::parse_size("")), "empty"));
}

TEST_CASE("units: a negative size is rejected and the message names the text") {
  auto message = failure(sluice::parse_size("-1GiB"));
  CHECK(contains(message, "'-1GiB'"));
  CHECK(contains(message, "negative"));
}

TEST_CASE("units: a fractional size is rejected with advice to use a smaller unit") {
  auto message = failure(sluice::parse_size("1.5GiB"));
  CHECK(contains(message, "'1.5GiB'"));
  CHECK(contains(message, "fractions are not accepted"));
  CHECK(contains(message, "1536MiB"));
}

TEST_CASE("units: an unknown size unit is rejected with the list of accepted units") {
  auto message = failure(sluice::parse_size("4gib"));
  CHECK(contains(message, "'4gib'"));
  CHECK(contains(message, "unknown unit 'gib'"));
  CHECK(contains(message, "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB"));
  CHECK(contains(failure(sluice::parse_size("4PiB")), "unknown unit 'PiB'"));
}

TEST_CASE("units: text that does not start with a number is rejected") {
  CHECK(contains(failure(sluice::parse_size("GiB")), "does not start with a whole number"));
  CHECK(contains(failure(sluice::parse_size(" 4GiB")), "does not start with a whole number"));
  CHECK(contains(failure(sluice::parse_size("+4GiB")), "does not start with a whole number"));
}

TEST_CASE("units: a size beyond 2^64 - 1 bytes is rejected") {
  CHECK(*sluice::parse_size("18446744073709551615") == 18446744073709551615ULL);
  CHECK(contains(failure(sluice::parse_size("18446744073709551616")), "too large"));
  CHECK(*sluice::parse_size("16777215TiB") == 16777215ULL << 40);
  CHECK(contains(failure(sluice::parse_size("16777216TiB")), "larger than 2^64 - 1 bytes"));
  CHECK(contains(failure(sluice::parse_size("18446744073709552KB")), "larger than 2^64 - 1 bytes"));
}

TEST_CASE("units: every duration unit is understood") {
  CHECK(*sluice::parse_duration("250us") == 250us);
  CHECK(*sluice::parse_duration("500ms") == 500ms);
  CHECK(*sluice::parse_duration("3s") == 3s);
  CHECK(*sluice::parse_duration("2m") == 2min);
  CHECK(*sluice::parse_duration("1h") == 1h);
  CHECK(*sluice::parse_duration("0s") == 0us);
  CHECK(*sluice::parse_duration("10 s") == 10s);
}

TEST_CASE("units: a duration without a unit is rejected because it is ambiguous") {
  auto message = failure(sluice::parse_duration("500"));
  CHECK(contains(message, "'500'"));
  CHECK(contains(message, "a unit is required"));
  CHECK(contains(message, "us, ms, s, m, h"));
}

TEST_CASE("units: a malformed duration is rejected and the message names the text") {
  CHECK(contains(failure(sluice::parse_duration("")), "empty"));
  CHECK(contains(failure(sluice::parse_duration("-5s")), "negative"));
  CHECK(contains(failure(sluice::parse_duration("1.5s")), "fractions are not accepted"));
  auto message = failure(sluice::parse_duration("5d"));
  CHECK(contains(message, "'5d'"));
  CHECK(contains(message, "unknown unit 'd'"));
  CHECK(contains(failure(sluice::parse_duration("5 sec")), "unknown unit 'sec'"));
}

TEST_CASE("units: a duration too long to hold in microseconds is rejected") {
  CHECK(contains(failure(sluice::parse_duration("9223372036854776s")), "too long"));
  CHECK(contains(failure(sluice::parse_duration("99999999999999999999us")), "too large"));
  CHECK(sluice::parse_duration("9223372036854775807us").ok());
  CHECK(contains(failure(sluice::parse_duration("9223372036854775808us")), "too long"));
}

TEST_CASE("units: sizes format with the largest binary unit that fits") {
  CHECK(sluice::format_size(0) == "0 B");
  CHECK(sluice::format_size(17) == "17 B");
  CHECK(sluice::format_size(1023) == "1023 B");
  CHECK(sluice::format_size(1024) == "1 KiB");
  CHECK(sluice::format_size(512ULL << 20) == "512 MiB");
  CHECK(sluice::format_size(3ULL << 30) == "3 GiB");
  CHECK(sluice::format_size(5ULL << 40) == "5 TiB");
}

TEST_CASE("units: a size that is not whole gets one decimal, never rounded up") {
  CHECK(sluice::format_size(3ULL << 29) == "1.5 GiB");
  CHECK(sluice::format_size(1536) == "1.5 KiB");
  CHECK(sluice::format_size((1ULL << 20) - 1) == "1023.9 KiB");
  CHECK(sluice::format_size((1ULL << 30) + 1) == "1.0 GiB");
  CHECK(sluice::format_size(18446744073709551615ULL) == "16777215.9 TiB");
}

TEST_CASE("units: a formatted whole size parses back to the same number") {
  for (std::uint64_t bytes : {17ULL, 1024ULL, 512ULL << 20, 7ULL << 30, 3ULL << 40}) {
    CHECK(*sluice::parse_size(sluice::format_size(bytes)) == bytes);
  }
}

TEST_CASE("units: durations format compactly, largest unit first") {
  CHECK(sluice::format_duration(500ms) == "500ms");
  CHECK(sluice::format_duration(3s) == "3s");
  CHECK(sluice::format_duration(90s) == "1m30s");
  CHECK(sluice::format_duration(250us) == "250us");
  CHECK(sluice::format_duration(0us) == "0s");
  CHECK(sluice::format_duration(1500ms) == "1s500ms");
  CHECK(sluice::format_duration(1h + 1us) == "1h1us");
  CHECK(sluice::format_duration(-2s) == "-2s");
}
