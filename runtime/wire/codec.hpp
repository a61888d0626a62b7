// The decode boundary: envelopes to frames and back. This is the only code
// that touches Cap'n Proto readers and builders; every malformed input is
// caught here and becomes an errc::protocol error, never an exception that
// reaches an actor.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "runtime/wire/frame.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice::wire {

/// Encodes `env` into a frame whose head holds the header and envelope
/// words; `payload` rides after it untouched (no copy).
outbound_frame encode(const envelope& env, shared_bytes payload = {});

/// Decodes a received frame. The envelope is read with traversal and
/// nesting limits derived from its size, so a hostile frame cannot make
/// the reader walk more than a small multiple of the bytes it sent.
result<message> decode(inbound_frame frame);

/// The reply_to field of an envelope not yet decoded (0 for a request or
/// notification), read without decoding the body: a transport uses it to
/// find where a reply's payload goes before the payload arrives. Nothing
/// when the envelope is malformed (decode() then says why).
/// REQUIRES: `envelope` is 8-byte aligned and a multiple of 8 bytes long.
std::optional<std::uint64_t> peek_reply_to(std::span<const std::byte> envelope);
/// What a relay looks at in a frame, read without decoding the message.
struct envelope_peek {
  std::uint64_t request_id = 0;
  std::uint64_t reply_to = 0;
  node_id source;
  std::uint64_t deadline_us = 0;
  bool rpc = false;  ///< the body is an rpc message
  /// The body is an rpc_reply naming this result buffer (0: none).
  std::uint64_t result_buffer = 0;
  /// The body is an rpc_call: its fields. `method` points into the
  /// frame's envelope: valid while the frame is.
  struct call_fields {
    std::string_view method;
    node_id target;
    rpc_routing routing = rpc_routing::round_robin;
    std::uint64_t args_buffer = 0;
  };
  std::optional<call_fields> call;
  /// The body is an rpc_cancel of this call.
  std::optional<std::uint64_t> cancel;
};

/// The envelope's ids and kind, read without building the message; nothing
/// when the envelope is malformed (decode() then says why).
std::optional<envelope_peek> peek(const inbound_frame& frame);

/// The ids a relay gives a frame it passes on.
struct envelope_ids {
  std::uint64_t request_id = 0;
  std::uint64_t reply_to = 0;
  node_id target;
};

/// `frame` as it came, with the envelope's request id, reply-to and target
/// replaced and `payload` after it: a relay passes a frame on without
/// decoding and encoding it again. Nothing when the envelope is not laid
/// out as this build writes envelopes (the relay then decodes and
/// encodes); the receiver checks the result like any frame.
std::optional<outbound_frame> relabel(const inbound_frame& frame, const envelope_ids& ids, shared_bytes payload);

/// Decodes one whole frame held in `bytes` (header, envelope, payload), for
/// tests, fuzzing and tools. Copies the envelope into an aligned buffer
/// and the payload into its own buffer.
result<message> decode_bytes(std::span<const std::byte> bytes, const frame_limits& limits);

/// Concatenates an outbound frame into one buffer (tests and tools).
byte_buffer flatten(const outbound_frame& frame);

}  // namespace sluice::wire
