// Test helpers for transports: a link_sink that records what a transport
// reports (thread-safe, with waits that give up after a deadline so a
// broken transport fails a test instead of hanging it), and helpers that
// build frames and check them on arrival.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "runtime/wire/frame.hpp"
#include "transports/transport.hpp"

namespace sluice::transport::testing {

using namespace std::chrono_literals;

/// How long a test waits for an event before it fails.
// Generous: a loaded CI machine may take seconds; passing tests never wait it out.
inline constexpr std::chrono::milliseconds wait_max = 20s;

class recording_sink final : public link_sink {
 public:
  /// Everything one link reported.
  struct link_record {
    std::optional<std::string> peer;  // from on_link_up
    std::vector<wire::inbound_frame> frames;
    /// Frames a fast path decoded and left (on_message).
    std::vector<wire::message> messages;
    std::optional<error> down;  // from on_link_down
    int ups = 0;
    int downs = 0;
    bool out_of_order = false;  // an event broke "up, frames, one down"
  };

  /// Decides what on_frame answers (outside the sink's lock, so it may
  /// call the transport). Set it before any traffic; empty accepts all.
  std::function<result<void>(link_id, const wire::inbound_frame&)> on_frame_hook;

  void on_link_up(link_id link, const std::string& peer) override {
    std::lock_guard guard{mutex_};
    auto& r = links_[link];
    if (r.ups != 0 || r.downs != 0 || !r.frames.empty()) r.out_of_order = true;
    ++r.ups;
    r.peer = peer;
    up_order_.push_back(link);
    changed_.notify_all();
  }

  result<void> on_frame(link_id link, wire::inbound_frame frame) override {
    result<void> verdict;
    if (on_frame_hook) verdict = on_frame_hook(link, frame);
    std::lock_guard guard{mutex_};
    auto& r = links_[link];
    if (r.ups != 1 || r.downs != 0) r.out_of_order = true;
    r.frames.push_back(std::move(frame));
    changed_.notify_all();
    return verdict;
  }

  result<void> on_message(link_id link, wire::message msg) override {
    std::lock_guard guard{mutex_};
    auto& r = links_[link];
    if (r.ups != 1 || r.downs != 0) r.out_of_order = true;
    r.messages.push_back(std::move(msg));
    changed_.notify_all();
    return {};
  }

  void on_link_down(link_id link, const error& reason) override {
    std::lock_guard guard{mutex_};
    auto& r = links_[link];
    if (r.downs != 0) r.out_of_order = true;
    ++r.downs;
    r.down = reason;
    changed_.notify_all();
  }

  /// The link of the n-th on_link_up (0-based), e.g. the accepted link.
  std::optional<link_id> wait_up(std::size_t n = 0, std::chrono::milliseconds timeout = wait_max) {
    std::unique_lock lock{mutex_};
    if (!changed_.wait_for(lock, timeout, [&] { return up_order_.size() > n; })) return std::nullopt;
    return up_order_[n];
  }

  /// True once `link` is up; false when it went down without coming up, or on timeout.
  bool wait_link_up(link_id link, std::chrono::milliseconds timeout = wait_max) {
    std::unique_lock lock{mutex_};
    changed_.wait_for(lock, timeout, [&] { return links_[link].ups > 0 || links_[link].downs > 0; });
    return links_[link].ups > 0;
  }

  /// True once `link` received at least `n` frames.
  bool wait_frames(link_id link, std::size_t n, std::chrono::milliseconds timeout = wait_max) {
    std::unique_lock lock{mutex_};
    return changed_.wait_for(lock, timeout, [&] { return links_[link].frames.size() >= n; });
  }

  /// The reason `link` went down; nullopt when it did not in time.
  std::optional<error> wait_down(link_id link, std::chrono::milliseconds timeout = wait_max) {
    std::unique_lock lock{mutex_};
    changed_.wait_for(lock, timeout, [&] { return links_[link].downs > 0; });
    return links_[link].down;
  }

  /// True once `link` received at least `n` frames and messages together.
  bool wait_received(link_id link, std::size_t n, std::chrono::milliseconds timeout = wait_max) {
    std::unique_lock lock{mutex_};
    return changed_.wait_for(lock, timeout,
                             [&] { return links_[link].frames.size() + links_[link].messages.size() >= n; });
  }

  std::vector<wire::message> messages(link_id link) {
    std::lock_guard guard{mutex_};
    return links_[link].messages;
  }

  std::vector<wire::inbound_frame> frames(link_id link) {
    std::lock_guard guard{mutex_};
    return links_[link].frames;
  }

  /// Forgets the frames received on `link` (releasing their bytes).
  void clear_frames(link_id link) {
    std::lock_guard guard{mutex_};
    links_[link].frames.clear();
  }

  std::optional<std::string> peer(link_id link) {
    std::lock_guard guard{mutex_};
    return links_[link].peer;
  }

  int downs(link_id link) {
    std::lock_guard guard{mutex_};
    return links_[link].downs;
  }

  std::size_t links_seen() {
    std::lock_guard guard{mutex_};
    return links_.size();
  }

  /// True when every link saw at most one up, then frames, then at most
  /// one down, and nothing after it.
  bool orderly() {
    std::lock_guard guard{mutex_};
    for (const auto& [link, r] : links_) {
      if (r.out_of_order || r.ups > 1 || r.downs > 1) return false;
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<link_id, link_record> links_;
  std::vector<link_id> up_order_;
};

/// Payload bytes that differ from position to position and seed to seed.
inline shared_bytes patterned(std::size_t size, std::uint64_t seed) {
  auto buffer = byte_buffer::allocate(size);
  for (std::size_t i = 0; i < size; ++i) {
    buffer.data()[i] = static_cast<std::byte>((i * 131 + (i >> 9) + seed * 7) & 0xff);
  }
  return std::move(buffer).freeze();
}

inline bool is_patterned(const shared_bytes& bytes, std::size_t size, std::uint64_t seed) {
  if (bytes.size() != size) return false;
  for (std::size_t i = 0; i < size; ++i) {
    if (bytes.data()[i] != static_cast<std::byte>((i * 131 + (i >> 9) + seed * 7) & 0xff)) return false;
  }
  return true;
}

/// A frame whose envelope words are `sequence` followed by words derived
/// from it (transports do not decode envelopes, so any words do).
inline wire::outbound_frame make_frame(std::uint64_t sequence, shared_bytes payload = {},
                                       std::size_t envelope_words = 2) {
  wire::frame_header h;
  h.envelope_bytes = static_cast<std::uint32_t>(envelope_words * 8);
  h.payload_bytes = payload.size();
  auto head = byte_buffer::allocate(wire::frame_header_bytes + h.envelope_bytes);
  auto header = wire::encode_frame_header(h);
  std::memcpy(head.data(), header.data(), header.size());
  for (std::size_t i = 0; i < envelope_words; ++i) {
    std::uint64_t word = i == 0 ? sequence : sequence * 31 + i;
    std::memcpy(head.data() + wire::frame_header_bytes + i * 8, &word, 8);
  }
  return wire::outbound_frame{std::move(head).freeze(), std::move(payload)};
}

/// The sequence number make_frame put in the envelope.
inline std::uint64_t sequence_of(const wire::inbound_frame& frame) {
  std::uint64_t word = 0;
  if (frame.envelope.size() >= 8) std::memcpy(&word, frame.envelope.data(), 8);
  return word;
}

/// True when the envelope holds exactly what make_frame(sequence, ..., words) wrote.
inline bool envelope_intact(const wire::inbound_frame& frame, std::uint64_t sequence, std::size_t envelope_words = 2) {
  if (frame.envelope.size() != envelope_words * 8) return false;
  if (reinterpret_cast<std::uintptr_t>(frame.envelope.data()) % 8 != 0) return false;
  for (std::size_t i = 0; i < envelope_words; ++i) {
    std::uint64_t word = 0;
    std::memcpy(&word, frame.envelope.data() + i * 8, 8);
    if (word != (i == 0 ? sequence : sequence * 31 + i)) return false;
  }
  return true;
}

/// A raw header with the given fields, for hand-made bad frames.
inline shared_bytes raw_header(std::uint32_t envelope_bytes, std::uint64_t payload_bytes) {
  wire::frame_header h;
  h.envelope_bytes = envelope_bytes;
  h.payload_bytes = payload_bytes;
  auto bytes = wire::encode_frame_header(h);
  return shared_bytes::copy_of(std::span<const std::byte>{bytes});
}

}  // namespace sluice::transport::testing
