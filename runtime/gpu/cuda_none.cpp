// The device of a build without CUDA: it finds nothing, says why, and
// answers every other call unavailable. Chosen at configure time
// (runtime/gpu/CMakeLists.txt) when no CUDA toolkit was found or
// SLUICE_CUDA=OFF.
#include "runtime/gpu/device.hpp"

namespace sluice::gpu {
namespace {

constexpr const char* no_cuda = "no CUDA in this build";

error unavailable() { return error{errc::unavailable, no_cuda}; }

class no_cuda_device final : public device {
 public:
  std::string kind() const override { return "none"; }
  probe_result probe() override { return {.devices = {}, .why_not = no_cuda}; }
  result<device_address> allocate(std::uint32_t, std::uint64_t) override { return unavailable(); }
  result<void> free(device_address) override { return unavailable(); }
  result<ipc_handle> export_ipc(device_address) override { return unavailable(); }
  result<device_address> open_ipc(std::uint32_t, const ipc_handle&) override { return unavailable(); }
  result<void> close_ipc(device_address) override { return unavailable(); }
  result<stream_handle> create_stream(std::uint32_t) override { return unavailable(); }
  result<void> destroy_stream(stream_handle) override { return unavailable(); }
  result<void> copy_to_device(stream_handle, device_address, const std::byte*, std::uint64_t) override {
    return unavailable();
  }
  result<void> copy_to_host(stream_handle, std::byte*, device_address, std::uint64_t) override {
    return unavailable();
  }
  result<void> copy_on_device(stream_handle, device_address, device_address, std::uint64_t) override {
    return unavailable();
  }
  result<event_handle> create_event(std::uint32_t) override { return unavailable(); }
  result<void> destroy_event(event_handle) override { return unavailable(); }
  result<void> record(event_handle, stream_handle) override { return unavailable(); }
  result<event_state> query(event_handle) override { return unavailable(); }
  result<void> stream_wait(stream_handle, event_handle) override { return unavailable(); }
};

}  // namespace

std::unique_ptr<device> make_cuda_device() { return std::make_unique<no_cuda_device>(); }

bool built_with_cuda() noexcept { return false; }

}  // namespace sluice::gpu
