// Framing: how an envelope and its payload travel as bytes on a stream.
// docs/wire-format.md gives the grammar; this file and that one agree.
//
//   frame   = header envelope payload
//   header  = 24 bytes, little-endian:
//             magic "SLCE" | version u16 | flags u16 | envelope_bytes u32 |
//             reserved u32 | payload_bytes u64
//   envelope = Cap'n Proto standard serialization of one Envelope,
//              envelope_bytes long, a multiple of 8
//   payload  = payload_bytes raw bytes
//
// The envelope comes before the payload so that, in a receive buffer that
// starts word-aligned, the Cap'n Proto words stay aligned; payload bytes go
// wherever the receiver wants them (a pool region, later).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/memory/buffer.hpp"
#include "sluice/result.hpp"

namespace sluice::wire {

inline constexpr std::size_t frame_header_bytes = 24;
/// "SLCE" read as a little-endian u32.
inline constexpr std::uint32_t frame_magic = 0x45434c53;
/// The framing version this build writes and accepts.
inline constexpr std::uint16_t frame_version = 1;

/// Bounds applied to every inbound frame before any memory is allocated
/// for it. Configured by [wire] in the node's config.
struct frame_limits {
  std::uint64_t max_envelope_bytes = 1ULL << 20;
  std::uint64_t max_payload_bytes = 1ULL << 30;
};

struct frame_header {
  std::uint16_t version = frame_version;
  std::uint16_t flags = 0;
  std::uint32_t envelope_bytes = 0;
  std::uint64_t payload_bytes = 0;
};

using header_bytes = std::array<std::byte, frame_header_bytes>;

header_bytes encode_frame_header(const frame_header& h) noexcept;

/// Checks magic, version, reserved bits, alignment and the limits.
/// Fails with errc::protocol and a message that says which check failed.
result<frame_header> parse_frame_header(std::span<const std::byte, frame_header_bytes> bytes,
                                        const frame_limits& limits);

/// A frame ready to send: `head` is the header followed by the envelope
/// words (one buffer); `payload` follows it on the wire and may be empty.
/// Senders use scatter/gather I/O, so the payload is never copied into
/// the head.
struct outbound_frame {
  shared_bytes head;
  shared_bytes payload;
  std::size_t size() const noexcept { return head.size() + payload.size(); }
};

/// A frame as received: the envelope words and the payload. Header checks
/// have passed; the envelope is not yet decoded.
/// INVARIANT: envelope.data() is 8-byte aligned (Cap'n Proto reads words
/// in place) and envelope.size() is a multiple of 8.
struct inbound_frame {
  shared_bytes envelope;
  shared_bytes payload;
};

}  // namespace sluice::wire
