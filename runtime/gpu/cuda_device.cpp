// The device over the CUDA runtime API, compiled by the host compiler and
// linked with the static CUDA runtime: a binary built with it needs no
// libcudart.so, only the driver (libcuda.so) when the machine has one, and
// runs — finding no device — when it has none.
//
// The only file that includes a CUDA header. Every call sets the device it
// works on first (the current device is per thread in CUDA, and the owner
// actor may run on any worker thread). Nothing here synchronises a device
// or a stream: copies and records are queued, events are queried.
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "runtime/gpu/device.hpp"

namespace sluice::gpu {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == ipc_handle_bytes, "the IPC handle travels as 64 bytes");

errc code_of(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorMemoryAllocation: return errc::no_capacity;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle: return errc::invalid_argument;
    default: return errc::unavailable;
  }
}

error cuda_error(cudaError_t e, std::string_view what) {
  // A failed call also sets the thread's last error; clear it so that a
  // later, unrelated query does not report it again.
  (void)cudaGetLastError();
  return error{code_of(e), fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e))};
}

/// Why the runtime found no device, in words a person can act on.
std::string why_no_device(cudaError_t e) {
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  if (e == cudaErrorNoDevice) return "no CUDA device";
  if (e == cudaErrorInsufficientDriver && driver == 0) return "no CUDA driver";
  if (e == cudaErrorInsufficientDriver) {
    return fmt::format("the CUDA driver ({}) is older than this build's CUDA runtime ({})", driver, CUDART_VERSION);
  }
  (void)cudaGetLastError();
  return fmt::format("CUDA cannot be used: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

device_info describe(int ordinal) {
  device_info info;
  info.ordinal = static_cast<std::uint32_t>(ordinal);
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, ordinal) == cudaSuccess) {
    info.name = props.name;
    info.memory_bytes = props.totalGlobalMem;
  }
  int unified = 0;
  // Legacy CUDA IPC (cudaIpcGetMemHandle) needs unified addressing.
  if (cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, ordinal) == cudaSuccess) info.ipc = unified != 0;
  (void)cudaGetLastError();
  return info;
}

class cuda_device final : public device {
 public:
  ~cuda_device() override;
  std::string kind() const override { return "cuda"; }
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
  template <class T>
  struct on_device {
    int ordinal = 0;
    T handle{};
  };
  /// The stream's device made current, and the stream; caller holds mutex_.
  result<cudaStream_t> use_stream(stream_handle stream);
  result<void> copy(stream_handle stream, void* to, const void* from, std::uint64_t bytes, cudaMemcpyKind kind);

  std::mutex mutex_;  // guards everything below
  std::uint64_t next_handle_ = 1;
  std::map<device_address, int> allocations_;  // address → device
  std::map<device_address, int> opened_;       // opened from IPC handles
  std::map<std::uint64_t, on_device<cudaStream_t>> streams_;
  std::map<std::uint64_t, on_device<cudaEvent_t>> events_;
};

cuda_device::~cuda_device() {
  // Whatever the owner did not give back goes now, device by device.
  for (auto& [id, e] : events_) {
    (void)cudaSetDevice(e.ordinal);
    (void)cudaEventDestroy(e.handle);
  }
  for (auto& [id, s] : streams_) {
    (void)cudaSetDevice(s.ordinal);
    (void)cudaStreamDestroy(s.handle);
  }
  for (auto& [address, ordinal] : opened_) {
    (void)cudaSetDevice(ordinal);
    (void)cudaIpcCloseMemHandle(reinterpret_cast<void*>(address));
  }
  for (auto& [address, ordinal] : allocations_) {
    (void)cudaSetDevice(ordinal);
    (void)cudaFree(reinterpret_cast<void*>(address));
  }
}

probe_result cuda_device::probe() {
  int count = 0;
  auto e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return {.devices = {}, .why_not = why_no_device(e)};
  if (count == 0) return {.devices = {}, .why_not = "no CUDA device"};
  probe_result found;
  for (int i = 0; i < count; ++i) found.devices.push_back(describe(i));
  return found;
}

result<device_address> cuda_device::allocate(std::uint32_t ordinal, std::uint64_t bytes) {
  std::lock_guard lock{mutex_};
  auto device = static_cast<int>(ordinal);
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(e, fmt::format("device {}", ordinal));
  void* memory = nullptr;
  if (auto e = cudaMalloc(&memory, bytes); e != cudaSuccess) {
    return cuda_error(e, fmt::format("allocating {} bytes on device {}", bytes, ordinal));
  }
  auto address = reinterpret_cast<device_address>(memory);
  allocations_.emplace(address, device);
  return address;
}

result<void> cuda_device::free(device_address address) {
  std::lock_guard lock{mutex_};
  auto it = allocations_.find(address);
  if (it == allocations_.end()) return error{errc::invalid_argument, "not the start of a device allocation"};
  (void)cudaSetDevice(it->second);
  auto e = cudaFree(reinterpret_cast<void*>(address));
  allocations_.erase(it);
  if (e != cudaSuccess) return cuda_error(e, "freeing device memory");
  return {};
}

result<ipc_handle> cuda_device::export_ipc(device_address address) {
  std::lock_guard lock{mutex_};
  auto it = allocations_.find(address);
  if (it == allocations_.end()) return error{errc::invalid_argument, "not the start of a device allocation"};
  (void)cudaSetDevice(it->second);
  cudaIpcMemHandle_t handle{};
  if (auto e = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(address)); e != cudaSuccess) {
    return cuda_error(e, "exporting an IPC handle");
  }
  ipc_handle out;
  static_assert(sizeof(handle) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), &handle, sizeof(handle));
  return out;
}

result<device_address> cuda_device::open_ipc(std::uint32_t ordinal, const ipc_handle& handle) {
  std::lock_guard lock{mutex_};
  auto device = static_cast<int>(ordinal);
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(e, fmt::format("device {}", ordinal));
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.bytes.data(), sizeof(h));
  void* memory = nullptr;
  if (auto e = cudaIpcOpenMemHandle(&memory, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
    return cuda_error(e, "opening an IPC handle");
  }
  auto address = reinterpret_cast<device_address>(memory);
  opened_.emplace(address, device);
  return address;
}

result<void> cuda_device::close_ipc(device_address address) {
  std::lock_guard lock{mutex_};
  auto it = opened_.find(address);
  if (it == opened_.end()) return error{errc::invalid_argument, "not an address opened from an IPC handle"};
  (void)cudaSetDevice(it->second);
  auto e = cudaIpcCloseMemHandle(reinterpret_cast<void*>(address));
  opened_.erase(it);
  if (e != cudaSuccess) return cuda_error(e, "closing an IPC handle");
  return {};
}

result<stream_handle> cuda_device::create_stream(std::uint32_t ordinal) {
  std::lock_guard lock{mutex_};
  auto device = static_cast<int>(ordinal);
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(e, fmt::format("device {}", ordinal));
  cudaStream_t stream = nullptr;
  // Non-blocking: never serialised with the legacy default stream, which
  // other code in the process may use.
  if (auto e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    return cuda_error(e, "creating a stream");
  }
  auto id = next_handle_++;
  streams_.emplace(id, on_device<cudaStream_t>{device, stream});
  return stream_handle{id};
}

result<void> cuda_device::destroy_stream(stream_handle stream) {
  std::lock_guard lock{mutex_};
  auto it = streams_.find(static_cast<std::uint64_t>(stream));
  if (it == streams_.end()) return error{errc::invalid_argument, "unknown stream"};
  (void)cudaSetDevice(it->second.ordinal);
  // Work still queued on it completes; the stream goes once it has.
  auto e = cudaStreamDestroy(it->second.handle);
  streams_.erase(it);
  if (e != cudaSuccess) return cuda_error(e, "destroying a stream");
  return {};
}

result<cudaStream_t> cuda_device::use_stream(stream_handle stream) {
  auto it = streams_.find(static_cast<std::uint64_t>(stream));
  if (it == streams_.end()) return error{errc::invalid_argument, "unknown stream"};
  if (auto e = cudaSetDevice(it->second.ordinal); e != cudaSuccess) return cuda_error(e, "selecting a device");
  return it->second.handle;
}

result<void> cuda_device::copy(stream_handle stream, void* to, const void* from, std::uint64_t bytes,
                               cudaMemcpyKind kind) {
  std::lock_guard lock{mutex_};
  auto s = use_stream(stream);
  if (!s) return s.error();
  if (auto e = cudaMemcpyAsync(to, from, bytes, kind, *s); e != cudaSuccess) return cuda_error(e, "queuing a copy");
  return {};
}

result<void> cuda_device::copy_to_device(stream_handle stream, device_address to, const std::byte* from,
                                         std::uint64_t bytes) {
  return copy(stream, reinterpret_cast<void*>(to), from, bytes, cudaMemcpyHostToDevice);
}

result<void> cuda_device::copy_to_host(stream_handle stream, std::byte* to, device_address from,
                                       std::uint64_t bytes) {
  return copy(stream, to, reinterpret_cast<const void*>(from), bytes, cudaMemcpyDeviceToHost);
}

result<void> cuda_device::copy_on_device(stream_handle stream, device_address to, device_address from,
                                         std::uint64_t bytes) {
  // Default: with unified addressing the runtime finds which devices the
  // two addresses are on, and copies between peers when they differ.
  return copy(stream, reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes, cudaMemcpyDefault);
}

result<event_handle> cuda_device::create_event(std::uint32_t ordinal) {
  std::lock_guard lock{mutex_};
  auto device = static_cast<int>(ordinal);
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error(e, fmt::format("device {}", ordinal));
  cudaEvent_t event = nullptr;
  if (auto e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess) {
    return cuda_error(e, "creating an event");
  }
  auto id = next_handle_++;
  events_.emplace(id, on_device<cudaEvent_t>{device, event});
  return event_handle{id};
}

result<void> cuda_device::destroy_event(event_handle event) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(event));
  if (it == events_.end()) return error{errc::invalid_argument, "unknown event"};
  (void)cudaSetDevice(it->second.ordinal);
  auto e = cudaEventDestroy(it->second.handle);
  events_.erase(it);
  if (e != cudaSuccess) return cuda_error(e, "destroying an event");
  return {};
}

result<void> cuda_device::record(event_handle event, stream_handle stream) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(event));
  if (it == events_.end()) return error{errc::invalid_argument, "unknown event"};
  auto s = use_stream(stream);
  if (!s) return s.error();
  if (auto e = cudaEventRecord(it->second.handle, *s); e != cudaSuccess) return cuda_error(e, "recording an event");
  return {};
}

result<event_state> cuda_device::query(event_handle event) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(event));
  if (it == events_.end()) return error{errc::invalid_argument, "unknown event"};
  (void)cudaSetDevice(it->second.ordinal);
  auto e = cudaEventQuery(it->second.handle);
  if (e == cudaSuccess) return event_state::done;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return event_state::pending;
  }
  return cuda_error(e, "the work before an event failed");
}

result<void> cuda_device::stream_wait(stream_handle stream, event_handle event) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(event));
  if (it == events_.end()) return error{errc::invalid_argument, "unknown event"};
  auto s = use_stream(stream);
  if (!s) return s.error();
  if (auto e = cudaStreamWaitEvent(*s, it->second.handle, 0); e != cudaSuccess) {
    return cuda_error(e, "making a stream wait for an event");
  }
  return {};
}

}  // namespace

std::unique_ptr<device> make_cuda_device() { return std::make_unique<cuda_device>(); }

bool built_with_cuda() noexcept { return true; }

}  // namespace sluice::gpu
