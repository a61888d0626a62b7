#include "runtime/wire/frame.hpp"

#include <cstdio>
#include <cstring>
#include <string>

namespace sluice::wire {
namespace {

template <class T>
void put_le(std::byte* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  }
}

template <class T>
T get_le(const std::byte* in) noexcept {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<T>(in[i]) << (8 * i));
  }
  return value;
}

}  // namespace

header_bytes encode_frame_header(const frame_header& h) noexcept {
  header_bytes out{};
  put_le<std::uint32_t>(out.data() + 0, frame_magic);
  put_le<std::uint16_t>(out.data() + 4, h.version);
  put_le<std::uint16_t>(out.data() + 6, h.flags);
  put_le<std::uint32_t>(out.data() + 8, h.envelope_bytes);
  put_le<std::uint32_t>(out.data() + 12, 0);
  put_le<std::uint64_t>(out.data() + 16, h.payload_bytes);
  return out;
}

result<frame_header> parse_frame_header(std::span<const std::byte, frame_header_bytes> bytes,
                                        const frame_limits& limits) {
  const std::byte* p = bytes.data();
  auto magic = get_le<std::uint32_t>(p);
  if (magic != frame_magic) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", magic);
    return fail(errc::protocol, std::string{"bad frame magic "} + text + " (expected \"SLCE\"); the peer does not speak the Sluice protocol");
  }
  frame_header h;
  h.version = get_le<std::uint16_t>(p + 4);
  h.flags = get_le<std::uint16_t>(p + 6);
  h.envelope_bytes = get_le<std::uint32_t>(p + 8);
  auto reserved = get_le<std::uint32_t>(p + 12);
  h.payload_bytes = get_le<std::uint64_t>(p + 16);
  if (h.version != frame_version) {
    return fail(errc::protocol, "unsupported frame version " + std::to_string(h.version) +
                                    " (this node speaks " + std::to_string(frame_version) + ")");
  }
  if (h.flags != 0 || reserved != 0) {
    return fail(errc::protocol, "frame sets reserved header bits");
  }
  if (h.envelope_bytes == 0 || h.envelope_bytes % 8 != 0) {
    return fail(errc::protocol, "envelope size " + std::to_string(h.envelope_bytes) +
                                    " is not a positive multiple of 8");
  }
  if (h.envelope_bytes > limits.max_envelope_bytes) {
    return fail(errc::protocol, "envelope of " + std::to_string(h.envelope_bytes) +
                                    " bytes exceeds the limit of " +
                                    std::to_string(limits.max_envelope_bytes));
  }
  if (h.payload_bytes > limits.max_payload_bytes) {
    return fail(errc::protocol, "payload of " + std::to_string(h.payload_bytes) +
                                    " bytes exceeds the limit of " +
                                    std::to_string(limits.max_payload_bytes));
  }
  return h;
}

}  // namespace sluice::wire
