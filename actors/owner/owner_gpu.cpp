// The owner's GPU pools: opened once at start from [owner.gpu] on the GPU
// runtime the node builder passed in (docs/gpu.md). Without a driver or a
// device the owner says so once and runs without them; whatever needs a
// GPU pool then answers unavailable with that same reason.
#include <fmt/format.h>

#include "actors/owner/owner_state.hpp"
#include "runtime/units.hpp"

namespace sluice::owner_detail {
namespace {

std::string describe_pools(const gpu::device_pools& pools) {
  std::vector<std::string> parts;
  for (auto& p : pools) {
    parts.push_back(fmt::format("device {} ({}) {}{}", p->info().ordinal, p->info().name,
                                format_size(p->capacity_bytes()), p->info().ipc ? "" : ", no IPC"));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

void init_gpu(self_ptr self, gpu::device* device) {
  auto& st = self->state;
  auto& cfg = st.cfg.gpu;
  st.gpu.device = device;
  if (!cfg.enabled) {
    st.gpu.unavailable = "no [owner.gpu] section in this owner's configuration";
    return;
  }
  if (device == nullptr) {
    st.gpu.unavailable = "this owner was started without a GPU runtime";
  } else if (auto pools = gpu::open_device_pools(*device, cfg); !pools) {
    st.gpu.unavailable = pools.error().message();
  } else {
    st.gpu.pools = std::move(*pools);
    st.ep->log()->info("gpu: {} pool{} of device memory: {}", st.gpu.pools.size(),
                       st.gpu.pools.size() == 1 ? "" : "s", describe_pools(st.gpu.pools));
    return;
  }
  // Said once: an owner without a GPU still serves everything else.
  st.ep->log()->warn("gpu: unavailable: {}; this owner runs without GPU pools", st.gpu.unavailable);
}

result<gpu::device_pool*> gpu_pool(self_ptr self, std::uint32_t device) {
  auto& st = self->state;
  if (st.gpu.pools.empty()) return error{errc::unavailable, "no GPU pools on this owner: " + st.gpu.unavailable};
  for (auto& p : st.gpu.pools) {
    if (p->info().ordinal == device) return p.get();
  }
  return error{errc::invalid_argument,
               fmt::format("this owner has no GPU pool on device {} (it has: {})", device, describe_pools(st.gpu.pools))};
}

gpu_report report_gpu(self_ptr self) {
  auto& st = self->state;
  gpu_report out;
  out.unavailable = st.gpu.unavailable;
  for (auto& p : st.gpu.pools) {
    out.pools.push_back({.device = p->info().ordinal,
                         .name = p->info().name,
                         .capacity_bytes = p->capacity_bytes(),
                         .used_bytes = p->stats().used_bytes,
                         .ipc = p->info().ipc});
  }
  return out;
}

}  // namespace sluice::owner_detail
