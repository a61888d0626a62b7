// device: the seam between Sluice and a GPU runtime — what an owner needs
// to contribute device memory as a pool and to move bytes to, from and
// between devices without ever waiting on them. Like the transport and
// storage interfaces, role code depends on this interface only; whoever
// builds a node picks the implementation:
//
//   make_cuda_device()  the CUDA runtime API (cuda_device.cpp), or, in a
//                       build without CUDA, one whose probe answers
//                       "no CUDA in this build" (cuda_none.cpp);
//   fake_device         host memory standing in for devices, for tests
//                       and the simulator (fake_device.hpp).
//
// The CUDA implementation is an I/O adapter in the sense of design.md's
// determinism rules: real CUDA calls happen only inside it. No CUDA type
// appears here: streams and events are opaque handles, device memory is
// an address (a uint64), so this header may be included anywhere.
//
// Nothing here blocks on the device: copies and event records are queued
// on streams and return at once; completion is learned by querying events
// (see event_pool.hpp). No method synchronises a device.
//
// Thread safety: every method from any thread; implementations lock
// their own tables. Handles are valid until destroyed; an unknown or
// destroyed handle is refused with invalid_argument, never a crash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/result.hpp"

namespace sluice::gpu {

/// What a probe found about one device.
struct device_info {
  std::uint32_t ordinal = 0;
  std::string name{};              ///< e.g. "NVIDIA H200"
  std::uint64_t memory_bytes = 0;  ///< the device's total memory
  /// Device memory can be shared with other processes of the host by
  /// IPC handles (CUDA: needs unified addressing).
  bool ipc = false;
};

struct probe_result {
  std::vector<device_info> devices{};
  /// Why no device can be used ("" when one can): e.g. "no CUDA driver",
  /// "no CUDA device", "no CUDA in this build".
  std::string why_not{};
  bool usable() const noexcept { return why_not.empty(); }
};

/// An address in a device's memory (CUDA: a device pointer). 0 is never a
/// valid allocation.
using device_address = std::uint64_t;

/// Opaque handles; 0 is never a valid one.
enum class stream_handle : std::uint64_t {};
enum class event_handle : std::uint64_t {};

/// Bytes that let another process of this host open an allocation (CUDA:
/// cudaIpcMemHandle_t, 64 bytes). A value type; never change the size,
/// it travels to clients.
inline constexpr std::size_t ipc_handle_bytes = 64;
struct ipc_handle {
  std::array<std::byte, ipc_handle_bytes> bytes{};
  friend bool operator==(const ipc_handle&, const ipc_handle&) = default;
};

/// Where an event stands when queried.
enum class event_state : std::uint8_t {
  pending = 0,  ///< the work before its record has not all finished
  done = 1,     ///< it has, or the event was never recorded
};

class device {
 public:
  virtual ~device() = default;

  /// "cuda", "fake", "none": which implementation this is, for log lines.
  virtual std::string kind() const = 0;
  /// The devices present. Never fails: without a driver, a device or
  /// CUDA support in the build it answers with none and the reason.
  virtual probe_result probe() = 0;

  /// Allocates `bytes` of device memory on `ordinal`, once, for a pool.
  /// Errors: no_capacity (the device is out of memory), invalid_argument
  /// (no such device), unavailable (the driver refused).
  virtual result<device_address> allocate(std::uint32_t ordinal, std::uint64_t bytes) = 0;
  /// Gives back an allocation made by allocate(). Errors: invalid_argument
  /// for an address that is not the start of a live allocation.
  virtual result<void> free(device_address address) = 0;

  /// A handle another process can open the allocation that starts at
  /// `address` with.
  virtual result<ipc_handle> export_ipc(device_address address) = 0;
  /// Opens an allocation another process exported; close_ipc undoes it.
  virtual result<device_address> open_ipc(std::uint32_t ordinal, const ipc_handle& handle) = 0;
  virtual result<void> close_ipc(device_address address) = 0;

  /// A stream on `ordinal` that does not synchronise with the default
  /// stream. Work queued on one stream runs in order.
  virtual result<stream_handle> create_stream(std::uint32_t ordinal) = 0;
  virtual result<void> destroy_stream(stream_handle stream) = 0;

  /// Copies queued on `stream`; they return once queued. REQUIRES: the
  /// memory on both sides stays allocated until an event recorded after
  /// the copy is done. Host memory that is not pinned makes CUDA copy
  /// synchronously with respect to the host (still correct, slower).
  virtual result<void> copy_to_device(stream_handle stream, device_address to, const std::byte* from,
                                      std::uint64_t bytes) = 0;
  virtual result<void> copy_to_host(stream_handle stream, std::byte* to, device_address from,
                                    std::uint64_t bytes) = 0;
  /// Between two addresses of one device or of two devices.
  virtual result<void> copy_on_device(stream_handle stream, device_address to, device_address from,
                                      std::uint64_t bytes) = 0;

  /// An event on `ordinal` (CUDA: with timing disabled, the cheap kind).
  virtual result<event_handle> create_event(std::uint32_t ordinal) = 0;
  virtual result<void> destroy_event(event_handle event) = 0;
  /// Marks the point after the work queued on `stream` so far: the event
  /// is done once that work is.
  virtual result<void> record(event_handle event, stream_handle stream) = 0;
  /// Where the event stands; never waits. An error means the work
  /// before it failed (CUDA: a sticky device error): it never completes.
  virtual result<event_state> query(event_handle event) = 0;
  /// Work queued on `stream` after this waits (on the device, not the
  /// host) until `event` is done: how copies follow a caller's work.
  virtual result<void> stream_wait(stream_handle stream, event_handle event) = 0;
};

/// The CUDA runtime when this build has it; else a device whose probe
/// says "no CUDA in this build" and whose other calls answer unavailable.
std::unique_ptr<device> make_cuda_device();

/// Whether this build was compiled against the CUDA runtime.
bool built_with_cuda() noexcept;

}  // namespace sluice::gpu
