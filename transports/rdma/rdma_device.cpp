// Devices, contexts, memory registration and completions, on libibverbs.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

#include "transports/rdma/rdma_verbs.hpp"

namespace sluice::transport::rdma {
namespace {

/// Frees the device list however probe() or open() leave.
struct device_list {
  ibv_device** devices = nullptr;
  int count = 0;
  device_list() { devices = ibv_get_device_list(&count); }
  ~device_list() {
    if (devices != nullptr) ibv_free_device_list(devices);
  }
};

/// The first active port of an opened device, if any.
std::optional<std::pair<std::uint8_t, ibv_port_attr>> active_port(ibv_context* c) {
  ibv_device_attr attributes{};
  if (ibv_query_device(c, &attributes) != 0) return std::nullopt;
  for (std::uint8_t port = 1; port <= attributes.phys_port_cnt; ++port) {
    ibv_port_attr p{};
    if (ibv_query_port(c, port, &p) == 0 && p.state == IBV_PORT_ACTIVE) return std::pair{port, p};
  }
  return std::nullopt;
}

}  // namespace

probe_result probe() {
  probe_result out;
  device_list list;
  if (list.devices == nullptr) {
    out.why_not = std::string{"no RDMA device: ibv_get_device_list failed: "} + std::strerror(errno);
    return out;
  }
  for (int i = 0; i < list.count; ++i) {
    device_info d;
    d.name = ibv_get_device_name(list.devices[i]);
    if (auto* c = ibv_open_device(list.devices[i])) {
      if (auto port = active_port(c)) {
        d.port = port->first;
        d.port_active = true;
        d.lid = port->second.lid;
      }
      ibv_close_device(c);
    }
    out.devices.push_back(std::move(d));
  }
  if (out.devices.empty()) {
    out.why_not = "no RDMA device found";
  } else if (std::none_of(out.devices.begin(), out.devices.end(), [](const device_info& d) { return d.port_active; })) {
    out.why_not = "no RDMA device has an active port";
  }
  return out;
}

context::handles::~handles() {
  for (auto* mr : regions) ibv_dereg_mr(mr);
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (pd != nullptr) ibv_dealloc_pd(pd);
  if (device != nullptr) ibv_close_device(device);
}

context::context(device_info device, std::unique_ptr<handles> h) : device_(std::move(device)), handles_(std::move(h)) {}
context::~context() = default;

result<std::unique_ptr<context>> context::open(std::uint32_t completion_entries) {
  auto found = probe();
  if (!found.usable()) return fail(errc::unavailable, found.why_not);
  device_list list;
  for (int i = 0; list.devices != nullptr && i < list.count; ++i) {
    auto h = std::make_unique<handles>();
    h->device = ibv_open_device(list.devices[i]);
    if (h->device == nullptr) continue;
    auto port = active_port(h->device);
    if (!port) continue;
    h->port = port->first;
    h->lid = port->second.lid;
    // GID index 0: the port's default address (what RoCE peers route by).
    if (ibv_query_gid(h->device, h->port, 0, &h->gid) != 0) std::memset(&h->gid, 0, sizeof h->gid);
    h->pd = ibv_alloc_pd(h->device);
    if (h->pd == nullptr) return fail(errc::internal, "ibv_alloc_pd failed: " + std::string{std::strerror(errno)});
    h->cq = ibv_create_cq(h->device, static_cast<int>(completion_entries), nullptr, nullptr, 0);
    if (h->cq == nullptr) return fail(errc::internal, "ibv_create_cq failed: " + std::string{std::strerror(errno)});
    device_info d{ibv_get_device_name(list.devices[i]), h->port, true, h->lid};
    return std::unique_ptr<context>{new context{std::move(d), std::move(h)}};
  }
  return fail(errc::unavailable, "no RDMA device with an active port could be opened");
}

result<memory_key> context::register_memory(std::span<std::byte> memory) {
  constexpr int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  auto* mr = ibv_reg_mr(handles_->pd, memory.data(), memory.size(), access);
  if (mr == nullptr) {
    return fail(errc::no_capacity, "ibv_reg_mr of " + std::to_string(memory.size()) +
                                       " bytes failed: " + std::strerror(errno) + " (is the locked-memory limit high enough?)");
  }
  handles_->regions.push_back(mr);
  return memory_key{reinterpret_cast<std::uint64_t>(memory.data()), memory.size(), mr->lkey, mr->rkey};
}

result<std::vector<completion>> context::poll(std::size_t max) {
  std::vector<ibv_wc> work(max);
  int got = ibv_poll_cq(handles_->cq, static_cast<int>(max), work.data());
  if (got < 0) return fail(errc::internal, "ibv_poll_cq failed");
  std::vector<completion> out;
  for (int i = 0; i < got; ++i) {
    auto& wc = work[static_cast<std::size_t>(i)];
    completion c{wc.wr_id, wc.status == IBV_WC_SUCCESS, {}, wc.byte_len};
    if (!c.ok) c.error = ibv_wc_status_str(wc.status);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace sluice::transport::rdma
