// Frames in and out of shm rings: a record holds one whole frame (header,
// envelope, payload). Checks both ways, because the ring's other end may
// be buggy or hostile.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "runtime/wire/frame.hpp"
#include "sluice/result.hpp"

namespace sluice::transport::shm {

/// A frame taken out of a ring record: header checked against `limits`,
/// sizes matching the record, envelope and payload copied out of shared
/// memory (the peer may reuse the record's space at once).
/// With `payload_elsewhere` set, the record holds only header and
/// envelope, and the header's payload length must equal it.
inline result<wire::inbound_frame> copy_inbound(std::span<const std::byte> record,
                                                const wire::frame_limits& limits,
                                                std::optional<std::uint64_t> payload_elsewhere = {}) {
  if (record.size() < wire::frame_header_bytes) {
    return fail(errc::protocol, "a ring record shorter than a frame header");
  }
  wire::header_bytes raw;
  std::memcpy(raw.data(), record.data(), raw.size());
  // A payload by reference lies in the owner's pool (the caller checked
  // that it lies inside a mapped segment): nothing is allocated or copied
  // for it here, so its segment bounds it, not the frame's payload limit.
  auto header_limits = limits;
  if (payload_elsewhere) {
    header_limits.max_payload_bytes = std::max<std::uint64_t>(limits.max_payload_bytes, *payload_elsewhere);
  }
  auto header = wire::parse_frame_header(raw, header_limits);
  if (!header) return header.error();
  auto body = record.subspan(wire::frame_header_bytes);
  if (payload_elsewhere) {
    if (header->payload_bytes != *payload_elsewhere || body.size() != header->envelope_bytes) {
      return fail(errc::protocol, "a by-reference ring record whose sizes do not match its header");
    }
    auto envelope = byte_buffer::allocate(header->envelope_bytes);
    std::memcpy(envelope.data(), body.data(), header->envelope_bytes);
    return wire::inbound_frame{std::move(envelope).freeze(), shared_bytes{}};
  }
  if (body.size() != std::uint64_t{header->envelope_bytes} + header->payload_bytes) {
    return fail(errc::protocol, "a ring record whose size does not match its frame header");
  }
  auto envelope = byte_buffer::allocate(header->envelope_bytes);
  std::memcpy(envelope.data(), body.data(), header->envelope_bytes);
  if (header->payload_bytes == 0) return wire::inbound_frame{std::move(envelope).freeze(), shared_bytes{}};
  auto payload = byte_buffer::allocate(header->payload_bytes);
  std::memcpy(payload.data(), body.data() + header->envelope_bytes, header->payload_bytes);
  return wire::inbound_frame{std::move(envelope).freeze(), std::move(payload).freeze()};
}

/// Whether `frame` can go into a ring whose records hold `record_bytes_max`
/// (with room for a record's prefix and region reference to spare). A
/// payload that travels as a reference to its pool region takes no room.
inline result<void> check_outbound(const wire::outbound_frame& frame, std::uint32_t record_bytes_max,
                                   bool payload_by_reference = false) {
  if (frame.head.size() < wire::frame_header_bytes) {
    return fail(errc::invalid_argument, "a frame without a header");
  }
  auto in_ring = payload_by_reference ? frame.head.size() : frame.size();
  if (in_ring > record_bytes_max) {
    return fail(errc::invalid_argument, "a frame of " + std::to_string(frame.size()) +
                                            " bytes does not fit the shm ring (at most " +
                                            std::to_string(record_bytes_max) + ")");
  }
  return {};
}

}  // namespace sluice::transport::shm

namespace sluice::transport::shm {

/// What a ring record holds. Every record starts with a record_prefix.
enum class record_kind : std::uint32_t {
  frame = 1,          ///< a whole frame follows: header, envelope, payload
  frame_by_ref = 2,   ///< a region_ref, then the frame's header and envelope;
                      ///< the payload is the region, in the owner's pool
  release = 3,        ///< lease ids (u64 each) the client no longer needs
};

struct record_prefix {
  std::uint32_t kind = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(record_prefix) == 8);

/// A payload left where it is: a region of the owner's pool, held for the
/// client under `lease` until the client releases it.
struct region_ref {
  std::uint32_t segment = 0;
  std::uint32_t reserved = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t lease = 0;
};
static_assert(sizeof(region_ref) == 32);

/// Leases one release record carries at most.
inline constexpr std::size_t releases_per_record_max = 512;

}  // namespace sluice::transport::shm
