// The decode boundary's envelope and framing; each message family's members
// are written and read in codec_<family>.cpp, which write_body and
// read_body dispatch to.
#include "runtime/wire/codec.hpp"

#include <cstring>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "runtime/assert.hpp"
#include "runtime/overloaded.hpp"
#include "runtime/wire/codec_detail.hpp"
#include "runtime/wire/codec_directory.hpp"
#include "runtime/wire/codec_kv.hpp"
#include "runtime/wire/codec_membership.hpp"
#include "runtime/wire/codec_mq.hpp"
#include "runtime/wire/codec_rpc.hpp"
#include "runtime/wire/codec_transfer.hpp"
#include "sluice.capnp.h"

namespace sluice::wire {
namespace {

using namespace codec_detail;

// --- encoding ---------------------------------------------------------------

void write_body(s::Envelope::Body::Builder b, const body& msg) {
  std::visit(
      overloaded{
          [&](const cluster_status&) { b.setClusterStatus(); },
          [&](const cluster_status_reply& x) { write_status(b.initClusterStatusReply(), x); },
          [&](const rpc& x) { write_rpc(b.initRpc(), x); },
          [&](const mq& x) { write_mq(b.initMq(), x); },
          // Every other member: its family's write_member (codec_<family>.cpp).
          [&](const auto& x) { write_member(b, x); },
      },
      msg);
}

// --- decoding ---------------------------------------------------------------

result<body> read_body(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::HELLO:
    case W::ERROR:
    case W::OK:
    case W::REGISTER_OWNER:
    case W::REGISTER_OWNER_REPLY:
    case W::HEARTBEAT:
    case W::HEARTBEAT_REPLY:
    case W::PING:
    case W::LEAVE: return read_membership(b);
    case W::PLACE:
    case W::PLACE_REPLY:
    case W::COMMIT:
    case W::ABORT_PUT:
    case W::LOCATE:
    case W::LOCATE_REPLY:
    case W::REMOVE_KEY:
    case W::REMOVE_KEY_REPLY:
    case W::DROP:
    case W::INVALIDATE:
    case W::COMMIT_REPLY:
    case W::EVICT:
    case W::EVICT_REPLY:
    case W::ADD_REPLICA:
    case W::ADD_REPLICA_REPLY:
    case W::INVENTORY:
    case W::INVENTORY_REPLY:
    case W::CLAIM:
    case W::CLAIM_REPLY:
    case W::OWNER_COMMITS:
    case W::OWNER_COMMITS_REPLY:
    case W::BARRIER:
    case W::FLUSHED:
    case W::REPAIR_COPY: return read_directory(b);
    case W::KV_PUT:
    case W::KV_PUT_REPLY:
    case W::KV_PUT_COPIES:
    case W::KV_GET:
    case W::KV_GET_REPLY:
    case W::KV_REMOVE:
    case W::KV_REMOVE_REPLY:
    case W::KV_EXISTS:
    case W::KV_EXISTS_REPLY:
    case W::KV_RESERVE:
    case W::KV_RESERVE_REPLY:
    case W::KV_COMMIT:
    case W::KV_ABORT:
    case W::LIST_KEYS:
    case W::LIST_KEYS_REPLY:
    case W::COUNT_KEYS:
    case W::COUNT_KEYS_REPLY:
    case W::PIN:
    case W::PIN_REPLY:
    case W::UNPIN:
    case W::UNPIN_REPLY: return read_kv(b);
    case W::FETCH:
    case W::FETCH_REPLY:
    case W::STORE:
    case W::FETCH_RANGE:
    case W::RDMA_CONNECT:
    case W::RDMA_CONNECT_REPLY:
    case W::RDMA_LEASE:
    case W::RDMA_RELEASE: return read_transfer(b);
    case W::CLUSTER_STATUS: return body{cluster_status{}};
    case W::CLUSTER_STATUS_REPLY: return body{read_status(b.getClusterStatusReply())};
    case W::RPC: {
      auto r = read_rpc(b.getRpc());
      if (!r) return std::move(r).error();
      return body{std::move(*r)};
    }
    case W::MQ: {
      auto r = read_mq(b.getMq());
      if (!r) return std::move(r).error();
      return body{std::move(*r)};
    }
  }
  return fail(errc::protocol, "unknown message kind " +
                                  std::to_string(static_cast<unsigned>(b.which())) +
                                  " (the peer speaks a newer protocol?)");
}

// Standard Cap'n Proto stream framing: u32 (segment count - 1), u32 size
// of each segment in words, padding to a word boundary, then the segments.
std::size_t segment_table_words(std::size_t segment_count) {
  return (4 + 4 * segment_count + 7) / 8;
}

}  // namespace

outbound_frame encode(const envelope& env, shared_bytes payload) {
  // Most envelopes fit in a first segment on the stack: no heap for the
  // builder on the hot path (it grows onto the heap when one does not).
  alignas(8) capnp::word scratch[128];
  std::memset(scratch, 0, sizeof scratch);
  capnp::MallocMessageBuilder builder{kj::arrayPtr(scratch, 128)};
  auto root = builder.initRoot<s::Envelope>();
  root.setRequestId(env.request_id);
  root.setReplyTo(env.reply_to);
  root.setSource(env.source.value);
  root.setTarget(env.target.value);
  root.setDeadlineUs(env.deadline_us);
  root.setHops(env.hops);
  root.setAfter(env.after);
  write_body(root.initBody(), env.body);

  auto segments = builder.getSegmentsForOutput();
  std::size_t words = segment_table_words(segments.size());
  for (auto seg : segments) words += seg.size();
  std::size_t envelope_bytes = words * sizeof(capnp::word);

  auto buf = byte_buffer::allocate(frame_header_bytes + envelope_bytes);
  std::memset(buf.data(), 0, buf.size());
  frame_header header{frame_version, 0, static_cast<std::uint32_t>(envelope_bytes), payload.size()};
  auto head = encode_frame_header(header);
  std::memcpy(buf.data(), head.data(), head.size());

  std::byte* out = buf.data() + frame_header_bytes;
  auto put_u32 = [&out](std::uint32_t v) {
    std::memcpy(out, &v, 4);  // x86-64 and aarch64 are little-endian, as the format
    out += 4;
  };
  put_u32(static_cast<std::uint32_t>(segments.size() - 1));
  for (auto seg : segments) put_u32(static_cast<std::uint32_t>(seg.size()));
  out = buf.data() + frame_header_bytes + segment_table_words(segments.size()) * 8;
  for (auto seg : segments) {
    std::memcpy(out, seg.begin(), seg.size() * sizeof(capnp::word));
    out += seg.size() * sizeof(capnp::word);
  }
  SLUICE_ASSERT(out == buf.data() + buf.size());
  return {std::move(buf).freeze(), std::move(payload)};
}

namespace {

kj::ArrayPtr<const capnp::word> words_of(const inbound_frame& frame) {
  SLUICE_ASSERT(reinterpret_cast<std::uintptr_t>(frame.envelope.data()) % 8 == 0);
  SLUICE_ASSERT(frame.envelope.size() % 8 == 0);
  return {reinterpret_cast<const capnp::word*>(frame.envelope.data()), frame.envelope.size() / sizeof(capnp::word)};
}

capnp::ReaderOptions reader_options(kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  // A well-formed envelope is read in about one pass over its words; allow
  // some slack, never an amplification a hostile peer could exploit.
  options.traversalLimitInWords = words.size() * 4 + 64;
  options.nestingLimit = 16;
  return options;
}

/// The flat reader computes the segment count (u32 + 1) in 32 bits, so a
/// count field of 0xffffffff wraps to 0 and would be read as one segment.
result<void> check_segment_table(const inbound_frame& frame) {
  std::uint32_t last_segment = 0;
  std::memcpy(&last_segment, frame.envelope.data(), sizeof last_segment);
  if (segment_table_words(std::size_t{last_segment} + 1) > frame.envelope.size() / 8) {
    return fail(errc::protocol, "envelope segment table lists " +
                                    std::to_string(std::uint64_t{last_segment} + 1) +
                                    " segments, more than fit in " +
                                    std::to_string(frame.envelope.size()) + " bytes");
  }
  return {};
}

}  // namespace

std::optional<envelope_peek> peek(const inbound_frame& frame) {
  if (frame.envelope.size() < 8 || !check_segment_table(frame)) return std::nullopt;
  auto words = words_of(frame);
  try {
    capnp::FlatArrayMessageReader reader{words, reader_options(words)};
    auto root = reader.getRoot<s::Envelope>();
    envelope_peek out;
    out.request_id = root.getRequestId();
    out.reply_to = root.getReplyTo();
    out.source = node_id{root.getSource()};
    out.deadline_us = root.getDeadlineUs();
    if (root.getBody().which() != s::Envelope::Body::Which::RPC) return out;
    out.rpc = true;
    auto r = root.getBody().getRpc();
    switch (r.which()) {
      case s::Rpc::Which::REPLY: out.result_buffer = r.getReply(); break;
      case s::Rpc::Which::CANCEL: out.cancel = r.getCancel(); break;
      case s::Rpc::Which::CALL: {
        auto c = r.getCall();
        // A routing this build does not know: decode() says so.
        if (c.getRouting() > static_cast<std::uint8_t>(rpc_routing::least_outstanding)) break;
        auto method = c.getMethod();
        out.call = envelope_peek::call_fields{std::string_view{method.begin(), method.size()}, node_id{c.getTarget()},
                                              static_cast<rpc_routing>(c.getRouting()), c.getArgsBuffer()};
        break;
      }
      default: break;
    }
    return out;
  } catch (const kj::Exception&) {
    return std::nullopt;
  }
}

std::optional<outbound_frame> relabel(const inbound_frame& frame, const envelope_ids& ids, shared_bytes payload) {
  // The root pointer starts segment 0; a struct pointer's low 2 bits are
  // 0, then a signed 30-bit offset in words from the pointer's end, then
  // the data section's size in words. requestId, replyTo, source and
  // target are its first four words (sluice.capnp, @0..@3).
  if (!check_segment_table(frame)) return std::nullopt;
  auto bytes = frame.envelope.span();
  std::uint32_t last_segment = 0;
  std::uint32_t first_words = 0;
  std::memcpy(&last_segment, bytes.data(), 4);
  std::memcpy(&first_words, bytes.data() + 4, 4);
  auto start = segment_table_words(std::size_t{last_segment} + 1);
  if (first_words < 1 || start + first_words > bytes.size() / 8) return std::nullopt;
  std::uint64_t root = 0;
  std::memcpy(&root, bytes.data() + start * 8, 8);
  auto offset = static_cast<std::int32_t>(static_cast<std::uint32_t>(root)) >> 2;
  auto data_words = static_cast<std::uint16_t>(root >> 32);
  if ((root & 3) != 0 || offset < 0 || data_words < 4) return std::nullopt;
  auto data = start + 1 + static_cast<std::size_t>(offset);
  if (data + 4 > start + first_words) return std::nullopt;
  auto buf = byte_buffer::allocate(frame_header_bytes + bytes.size());
  auto head = encode_frame_header(
      frame_header{frame_version, 0, static_cast<std::uint32_t>(bytes.size()), payload.size()});
  std::memcpy(buf.data(), head.data(), head.size());
  auto* env = buf.data() + frame_header_bytes;
  std::memcpy(env, bytes.data(), bytes.size());
  std::memcpy(env + data * 8, &ids.request_id, 8);
  std::memcpy(env + (data + 1) * 8, &ids.reply_to, 8);
  std::memcpy(env + (data + 3) * 8, &ids.target.value, 8);
  return outbound_frame{std::move(buf).freeze(), std::move(payload)};
}

result<message> decode(inbound_frame frame) {
  auto words = words_of(frame);
  auto options = reader_options(words);
  if (auto ok = check_segment_table(frame); !ok) return ok.error();
  try {
    capnp::FlatArrayMessageReader reader{words, options};
    if (reader.getEnd() != words.end()) {
      return fail(errc::protocol, "envelope has trailing bytes after the message");
    }
    auto root = reader.getRoot<s::Envelope>();
    auto parsed_body = read_body(root.getBody());
    if (!parsed_body) return std::move(parsed_body).error();
    message out;
    out.env.request_id = root.getRequestId();
    out.env.reply_to = root.getReplyTo();
    out.env.source = node_id{root.getSource()};
    out.env.target = node_id{root.getTarget()};
    out.env.deadline_us = root.getDeadlineUs();
    out.env.hops = root.getHops();
    out.env.after = root.getAfter();
    out.env.body = std::move(*parsed_body);
    out.payload = std::move(frame.payload);
    return out;
  } catch (const kj::Exception& e) {
    return fail(errc::protocol, "malformed envelope: " + std::string{e.getDescription().cStr()});
  }
}

std::optional<std::uint64_t> peek_reply_to(std::span<const std::byte> envelope) {
  SLUICE_ASSERT(reinterpret_cast<std::uintptr_t>(envelope.data()) % 8 == 0);
  SLUICE_ASSERT(envelope.size() % 8 == 0);
  kj::ArrayPtr<const capnp::word> words{reinterpret_cast<const capnp::word*>(envelope.data()),
                                        envelope.size() / sizeof(capnp::word)};
  if (words.size() == 0) return std::nullopt;
  std::uint32_t last_segment = 0;
  std::memcpy(&last_segment, envelope.data(), sizeof last_segment);
  if (segment_table_words(std::size_t{last_segment} + 1) > words.size()) return std::nullopt;
  capnp::ReaderOptions options;
  // Only the root struct's data section is read.
  options.traversalLimitInWords = words.size() + 64;
  options.nestingLimit = 4;
  try {
    capnp::FlatArrayMessageReader reader{words, options};
    return reader.getRoot<s::Envelope>().getReplyTo();
  } catch (const kj::Exception&) {
    return std::nullopt;
  }
}

result<message> decode_bytes(std::span<const std::byte> bytes, const frame_limits& limits) {
  if (bytes.size() < frame_header_bytes) {
    return fail(errc::protocol, "frame of " + std::to_string(bytes.size()) +
                                    " bytes is shorter than its header");
  }
  auto header = parse_frame_header(bytes.first<frame_header_bytes>(), limits);
  if (!header) return std::move(header).error();
  // Compared without adding the sizes: under a payload limit near 2^64 the
  // sum could wrap and let a short frame through to the copies below.
  std::uint64_t after_header = bytes.size() - frame_header_bytes;
  if (after_header < header->envelope_bytes ||
      after_header - header->envelope_bytes != header->payload_bytes) {
    return fail(errc::protocol, "frame is " + std::to_string(bytes.size()) +
                                    " bytes but its header says " +
                                    std::to_string(frame_header_bytes) + " + " +
                                    std::to_string(header->envelope_bytes) + " + " +
                                    std::to_string(header->payload_bytes));
  }
  auto envelope = byte_buffer::allocate(header->envelope_bytes);
  std::memcpy(envelope.data(), bytes.data() + frame_header_bytes, header->envelope_bytes);
  auto payload = shared_bytes::copy_of(bytes.subspan(frame_header_bytes + header->envelope_bytes));
  return decode(inbound_frame{std::move(envelope).freeze(), std::move(payload)});
}

byte_buffer flatten(const outbound_frame& frame) {
  auto out = byte_buffer::allocate(frame.size());
  if (!frame.head.empty()) std::memcpy(out.data(), frame.head.data(), frame.head.size());
  if (!frame.payload.empty()) {
    std::memcpy(out.data() + frame.head.size(), frame.payload.data(), frame.payload.size());
  }
  return out;
}

std::string_view body_name(const body& b) noexcept {
  static constexpr std::string_view names[] = {
      "hello", "error_reply", "ok_reply",
      "register_owner", "register_owner_reply", "heartbeat", "heartbeat_reply",
      "place", "place_reply", "commit", "abort_put", "locate", "locate_reply",
      "remove_key", "remove_key_reply", "drop",
      "fetch", "fetch_reply", "store",
      "kv_put", "kv_put_reply", "kv_get", "kv_get_reply", "kv_remove",
      "kv_remove_reply", "kv_exists", "kv_exists_reply",
      "cluster_status", "cluster_status_reply", "ping", "leave",
      "kv_reserve", "kv_reserve_reply", "kv_commit", "kv_abort",
      "invalidate", "commit_reply", "list_keys", "list_keys_reply", "count_keys", "count_keys_reply", "evict", "evict_reply", "pin", "pin_reply", "unpin", "unpin_reply", "add_replica", "add_replica_reply", "inventory", "inventory_reply",
      "claim", "claim_reply", "owner_commits", "owner_commits_reply", "barrier", "flushed",
      "fetch_range", "rpc", "rdma_connect", "rdma_connect_reply", "rdma_lease", "rdma_release", "mq", "repair_copy"};
  static_assert(std::size(names) == std::variant_size_v<body>);
  if (auto* r = std::get_if<rpc>(&b)) return rpc_body_name(r->body);
  if (auto* m = std::get_if<mq>(&b)) return mq_body_name(m->body);
  return names[b.index()];
}

}  // namespace sluice::wire
