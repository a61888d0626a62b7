// fake_device: devices made of host memory, for tests and the simulator.
// It keeps CUDA's ordering rules — work on one stream runs in order, an
// event is done once the work queued before its record is, a stream that
// waits for an event runs nothing after the wait until the event is done —
// but nothing runs until the fake is told to advance(), so a test decides
// exactly when each copy lands. Deterministic: advance() walks streams in
// the order they were created.
//
// Addresses are made up (never dereferenceable), unique for the fake's
// life and never 0; a copy is checked against the allocations when it is
// queued, as CUDA would refuse it.
//
// Thread safety: every method from any thread (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/gpu/device.hpp"

namespace sluice::gpu {

struct fake_options {
  std::uint32_t device_count = 1;
  std::uint64_t memory_bytes = std::uint64_t{64} << 20;  ///< per device
  bool ipc = true;
  /// Not empty: the fake has no usable device and probe() says this
  /// (e.g. "no CUDA driver"); every other call answers unavailable.
  std::string why_not{};
};

class fake_device final : public device {
 public:
  explicit fake_device(fake_options options = {});

  /// Runs up to `ops_max` queued operations (a copy, a record, a wait that
  /// is satisfied), taking the first ready one of each stream in turn, in
  /// the order the streams were created. Returns how many ran; 0 when
  /// nothing is ready.
  std::size_t advance(std::size_t ops_max = 1);
  /// advance() until nothing is ready.
  std::size_t drain();
  /// Operations queued on all streams, ready or not.
  std::size_t queued() const;
  /// From now on, queries of `event` answer an error, as a CUDA device
  /// with a sticky error would.
  void fail_event(event_handle event, std::string why);
  /// Live allocations' bytes on `ordinal`.
  std::uint64_t allocated_bytes(std::uint32_t ordinal) const;
  /// The bytes at `address`, for tests to look at. REQUIRES: the range
  /// lies in a live allocation.
  std::vector<std::byte> read(device_address address, std::uint64_t bytes) const;

  std::string kind() const override { return "fake"; }
  probe_result probe() override;
  result<device_address> allocate(std::uint32_t ordinal, std::uint64_t bytes) override;
  result<void> free(device_address address) override;
  result<ipc_handle> export_ipc(device_address address) override;
  result<device_address> open_ipc(std::uint32_t ordinal, const ipc_handle& handle) override;
  result<void> close_ipc(device_address address) override;
  result<stream_handle> create_stream(std::uint32_t ordinal) override;
  result<void> destroy_stream(stream_handle stream) override;
  result<void> copy_to_device(stream_handle stream, device_address to, const std::byte* from,
                              std::uint64_t bytes) override;
  result<void> copy_to_host(stream_handle stream, std::byte* to, device_address from, std::uint64_t bytes) override;
  result<void> copy_on_device(stream_handle stream, device_address to, device_address from,
                              std::uint64_t bytes) override;
  result<event_handle> create_event(std::uint32_t ordinal) override;
  result<void> destroy_event(event_handle event) override;
  result<void> record(event_handle event, stream_handle stream) override;
  result<event_state> query(event_handle event) override;
  result<void> stream_wait(stream_handle stream, event_handle event) override;

 private:
  struct allocation {
    std::uint32_t ordinal = 0;
    std::vector<std::byte> bytes{};
  };
  /// One queued operation: a copy (to, from, bytes), or a record / a
  /// wait of `event` at `generation`.
  struct op {
    enum class kind : std::uint8_t { copy, record, wait } what = kind::copy;
    std::byte* to = nullptr;
    const std::byte* from = nullptr;
    std::uint64_t bytes = 0;
    std::uint64_t event = 0;
    std::uint64_t generation = 0;
  };
  struct stream {
    std::uint32_t ordinal = 0;
    std::deque<op> ops{};
  };
  struct event {
    std::uint32_t ordinal = 0;
    std::uint64_t recorded = 0;  ///< generation of the latest record
    std::uint64_t reached = 0;   ///< generation its stream has run through
    std::string failed{};
  };

  result<void> usable() const;
  std::uint64_t allocated_locked(std::uint32_t ordinal) const;
  result<std::byte*> resolve(device_address address, std::uint64_t bytes);
  result<void> queue_copy(stream_handle s, std::byte* to, const std::byte* from, std::uint64_t bytes);
  bool ready(const op& o) const;
  void run(const op& o);
  std::size_t advance_locked(std::size_t ops_max);

  fake_options options_;
  mutable std::mutex mutex_;  // guards everything below
  device_address next_address_;
  std::uint64_t next_handle_ = 1;
  std::map<device_address, allocation> allocations_;
  std::map<device_address, std::uint32_t> opened_;  // address → times opened
  std::map<std::uint64_t, stream> streams_;         // ordered by creation
  std::map<std::uint64_t, event> events_;
};

}  // namespace sluice::gpu
