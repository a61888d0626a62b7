// The frame header: its byte layout (docs/wire-format.md) and every check
// parse_frame_header makes before a receiver allocates anything.
#include "runtime/wire/frame.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>

namespace {

using namespace sluice;
using namespace sluice::wire;

void put_u16(header_bytes& bytes, std::size_t at, std::uint16_t value) {
  bytes[at + 0] = static_cast<std::byte>(value & 0xff);
  bytes[at + 1] = static_cast<std::byte>(value >> 8);
}

void put_u32(header_bytes& bytes, std::size_t at, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i)
    bytes[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

void put_u64(header_bytes& bytes, std::size_t at, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i)
    bytes[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

header_bytes valid_header() { return encode_frame_header(frame_header{frame_version, 0, 64, 100}); }

result<frame_header> parse(const header_bytes& bytes, const frame_limits& limits = {}) {
  return parse_frame_header(std::span<const std::byte, frame_header_bytes>{bytes}, limits);
}

// The header is rejected as a protocol error whose message contains `word`.
void check_rejected(const header_bytes& bytes, const std::string& word,
                    const frame_limits& limits = {}) {
  auto parsed = parse(bytes, limits);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.code() == errc::protocol);
  INFO("message: " << parsed.error().message());
  CHECK(parsed.error().message().find(word) != std::string::npos);
}

}  // namespace

TEST_CASE("wire: a frame header survives encode and parse") {
  const frame_header cases[] = {
      {frame_version, 0, 8, 0},
      {frame_version, 0, 64, 100},
      {frame_version, 0, 1U << 20, 1ULL << 30},
  };
  for (const auto& h : cases) {
    auto parsed = parse(encode_frame_header(h));
    REQUIRE(parsed.ok());
    CHECK(parsed->version == h.version);
    CHECK(parsed->flags == h.flags);
    CHECK(parsed->envelope_bytes == h.envelope_bytes);
    CHECK(parsed->payload_bytes == h.payload_bytes);
  }
}

TEST_CASE("wire: the frame header is 24 little-endian bytes starting with SLCE") {
  auto bytes = encode_frame_header(frame_header{frame_version, 0, 0x01020308, 0x1112131415161718});
  const unsigned char expected[frame_header_bytes] = {
      'S',  'L',  'C',  'E',                           // magic
      0x01, 0x00,                                      // version 1
      0x00, 0x00,                                      // flags
      0x08, 0x03, 0x02, 0x01,                          // envelope_bytes
      0x00, 0x00, 0x00, 0x00,                          // reserved
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // payload_bytes
  };
  for (std::size_t i = 0; i < frame_header_bytes; ++i) {
    CAPTURE(i);
    CHECK(std::to_integer<unsigned>(bytes[i]) == expected[i]);
  }
}

TEST_CASE("wire: a header with the wrong magic is rejected and the message names the magic") {
  auto bytes = valid_header();
  bytes[0] = std::byte{'H'};  // e.g. an HTTP client that dialled the wrong port
  check_rejected(bytes, "magic");
}

TEST_CASE("wire: a header with an unsupported version is rejected") {
  for (std::uint16_t version :
       {std::uint16_t{0}, std::uint16_t{frame_version + 1}, std::uint16_t{0xffff}}) {
    CAPTURE(version);
    auto bytes = valid_header();
    put_u16(bytes, 4, version);
    check_rejected(bytes, "version " + std::to_string(version));
  }
}

TEST_CASE("wire: a header that sets reserved bits is rejected") {
  SUBCASE("flags") {
    auto bytes = valid_header();
    put_u16(bytes, 6, 0x0001);
    check_rejected(bytes, "reserved");
  }
  SUBCASE("the reserved word") {
    auto bytes = valid_header();
    put_u32(bytes, 12, 0x80000000U);
    check_rejected(bytes, "reserved");
  }
}

TEST_CASE("wire: a header with an empty envelope is rejected") {
  auto bytes = valid_header();
  put_u32(bytes, 8, 0);
  check_rejected(bytes, "envelope size 0");
}

TEST_CASE("wire: a header whose envelope size is not a multiple of 8 is rejected") {
  for (std::uint32_t size : {1U, 7U, 12U, 65U, 0xffffffffU}) {
    CAPTURE(size);
    auto bytes = valid_header();
    put_u32(bytes, 8, size);
    check_rejected(bytes, "multiple of 8");
  }
}

TEST_CASE("wire: a header whose envelope is above the limit is rejected") {
  frame_limits limits;
  limits.max_envelope_bytes = 4096;
  auto at_limit = valid_header();
  put_u32(at_limit, 8, 4096);
  CHECK(parse(at_limit, limits).ok());

  auto above = valid_header();
  put_u32(above, 8, 4096 + 8);
  check_rejected(above, "envelope of 4104 bytes exceeds the limit of 4096", limits);

  auto huge = valid_header();
  put_u32(huge, 8, 0xfffffff8U);
  check_rejected(huge, "exceeds the limit", frame_limits{});
}

TEST_CASE("wire: a header whose payload is above the limit is rejected") {
  frame_limits limits;
  limits.max_payload_bytes = 1000;
  auto at_limit = valid_header();
  put_u64(at_limit, 16, 1000);
  CHECK(parse(at_limit, limits).ok());

  auto above = valid_header();
  put_u64(above, 16, 1001);
  check_rejected(above, "payload of 1001 bytes exceeds the limit of 1000", limits);

  auto huge = valid_header();
  put_u64(huge, 16, ~std::uint64_t{0});
  check_rejected(huge, "payload", frame_limits{});
}
