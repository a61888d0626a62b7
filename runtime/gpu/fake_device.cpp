#include "runtime/gpu/fake_device.hpp"

#include <cstring>

#include <fmt/format.h>

#include "runtime/assert.hpp"

namespace sluice::gpu {
namespace {

/// Made-up addresses start here and advance past each allocation with a
/// gap, so that no address is 0 and a range never runs into the next one.
constexpr device_address first_address = device_address{1} << 40;
constexpr std::uint64_t address_gap_bytes = std::uint64_t{1} << 20;

error invalid(std::string what) { return error{errc::invalid_argument, std::move(what)}; }

}  // namespace

fake_device::fake_device(fake_options options) : options_(std::move(options)), next_address_(first_address) {}

result<void> fake_device::usable() const {
  if (!options_.why_not.empty()) return error{errc::unavailable, options_.why_not};
  return {};
}

probe_result fake_device::probe() {
  if (!options_.why_not.empty()) return {.devices = {}, .why_not = options_.why_not};
  probe_result found;
  for (std::uint32_t i = 0; i < options_.device_count; ++i) {
    found.devices.push_back({.ordinal = i, .name = fmt::format("fake device {}", i),
                             .memory_bytes = options_.memory_bytes, .ipc = options_.ipc});
  }
  return found;
}

std::uint64_t fake_device::allocated_bytes(std::uint32_t ordinal) const {
  std::lock_guard lock{mutex_};
  return allocated_locked(ordinal);
}

std::uint64_t fake_device::allocated_locked(std::uint32_t ordinal) const {
  std::uint64_t sum = 0;
  for (auto& [address, a] : allocations_) {
    if (a.ordinal == ordinal) sum += a.bytes.size();
  }
  return sum;
}

result<device_address> fake_device::allocate(std::uint32_t ordinal, std::uint64_t bytes) {
  if (auto ok = usable(); !ok) return ok.error();
  if (ordinal >= options_.device_count) return invalid(fmt::format("no device {}", ordinal));
  std::lock_guard lock{mutex_};
  auto used = allocated_locked(ordinal);
  if (bytes > options_.memory_bytes - used) {
    return error{errc::no_capacity, fmt::format("device {} has {} of {} bytes free, {} asked for", ordinal,
                                                options_.memory_bytes - used, options_.memory_bytes, bytes)};
  }
  auto address = next_address_;
  next_address_ += bytes + address_gap_bytes;
  allocations_.emplace(address, allocation{ordinal, std::vector<std::byte>(bytes)});
  return address;
}

result<void> fake_device::free(device_address address) {
  std::lock_guard lock{mutex_};
  if (allocations_.erase(address) == 0) return invalid("not the start of a device allocation");
  return {};
}

result<ipc_handle> fake_device::export_ipc(device_address address) {
  std::lock_guard lock{mutex_};
  if (!options_.ipc) return error{errc::unavailable, "the fake device has IPC turned off"};
  if (allocations_.count(address) == 0) return invalid("not the start of a device allocation");
  ipc_handle handle;
  std::memcpy(handle.bytes.data(), &address, sizeof(address));
  return handle;
}

result<device_address> fake_device::open_ipc(std::uint32_t ordinal, const ipc_handle& handle) {
  std::lock_guard lock{mutex_};
  device_address address = 0;
  std::memcpy(&address, handle.bytes.data(), sizeof(address));
  auto it = allocations_.find(address);
  if (it == allocations_.end() || it->second.ordinal != ordinal) return invalid("not an IPC handle of a live allocation");
  ++opened_[address];
  return address;
}

result<void> fake_device::close_ipc(device_address address) {
  std::lock_guard lock{mutex_};
  auto it = opened_.find(address);
  if (it == opened_.end()) return invalid("not an address opened from an IPC handle");
  if (--it->second == 0) opened_.erase(it);
  return {};
}

result<stream_handle> fake_device::create_stream(std::uint32_t ordinal) {
  if (auto ok = usable(); !ok) return ok.error();
  if (ordinal >= options_.device_count) return invalid(fmt::format("no device {}", ordinal));
  std::lock_guard lock{mutex_};
  auto id = next_handle_++;
  streams_.emplace(id, stream{ordinal, {}});
  return stream_handle{id};
}

result<void> fake_device::destroy_stream(stream_handle s) {
  std::lock_guard lock{mutex_};
  auto it = streams_.find(static_cast<std::uint64_t>(s));
  if (it == streams_.end()) return invalid("unknown stream");
  // CUDA lets queued work finish after a stream is destroyed; so does the
  // fake, at once, which is one of the orders CUDA may pick.
  while (!it->second.ops.empty() && ready(it->second.ops.front())) {
    run(it->second.ops.front());
    it->second.ops.pop_front();
  }
  streams_.erase(it);
  return {};
}

result<std::byte*> fake_device::resolve(device_address address, std::uint64_t bytes) {
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return invalid(fmt::format("address {:#x} is not device memory", address));
  --it;
  auto offset = address - it->first;
  auto& memory = it->second.bytes;
  if (offset > memory.size() || bytes > memory.size() - offset) {
    return invalid(fmt::format("{} bytes at {:#x} are not inside one allocation", bytes, address));
  }
  return memory.data() + offset;
}

std::vector<std::byte> fake_device::read(device_address address, std::uint64_t bytes) const {
  std::lock_guard lock{mutex_};
  auto it = allocations_.upper_bound(address);
  SLUICE_ASSERT(it != allocations_.begin());
  --it;
  auto offset = address - it->first;
  SLUICE_ASSERT(offset + bytes <= it->second.bytes.size());
  auto from = it->second.bytes.begin() + static_cast<std::ptrdiff_t>(offset);
  return {from, from + static_cast<std::ptrdiff_t>(bytes)};
}

result<void> fake_device::queue_copy(stream_handle s, std::byte* to, const std::byte* from, std::uint64_t bytes) {
  auto it = streams_.find(static_cast<std::uint64_t>(s));
  if (it == streams_.end()) return invalid("unknown stream");
  it->second.ops.push_back({.what = op::kind::copy, .to = to, .from = from, .bytes = bytes});
  return {};
}

result<void> fake_device::copy_to_device(stream_handle s, device_address to, const std::byte* from,
                                         std::uint64_t bytes) {
  std::lock_guard lock{mutex_};
  auto dst = resolve(to, bytes);
  if (!dst) return dst.error();
  return queue_copy(s, *dst, from, bytes);
}

result<void> fake_device::copy_to_host(stream_handle s, std::byte* to, device_address from, std::uint64_t bytes) {
  std::lock_guard lock{mutex_};
  auto src = resolve(from, bytes);
  if (!src) return src.error();
  return queue_copy(s, to, *src, bytes);
}

result<void> fake_device::copy_on_device(stream_handle s, device_address to, device_address from,
                                         std::uint64_t bytes) {
  std::lock_guard lock{mutex_};
  auto dst = resolve(to, bytes);
  if (!dst) return dst.error();
  auto src = resolve(from, bytes);
  if (!src) return src.error();
  return queue_copy(s, *dst, *src, bytes);
}

result<event_handle> fake_device::create_event(std::uint32_t ordinal) {
  if (auto ok = usable(); !ok) return ok.error();
  if (ordinal >= options_.device_count) return invalid(fmt::format("no device {}", ordinal));
  std::lock_guard lock{mutex_};
  auto id = next_handle_++;
  events_.emplace(id, event{.ordinal = ordinal});
  return event_handle{id};
}

result<void> fake_device::destroy_event(event_handle e) {
  std::lock_guard lock{mutex_};
  if (events_.erase(static_cast<std::uint64_t>(e)) == 0) return invalid("unknown event");
  return {};
}

result<void> fake_device::record(event_handle e, stream_handle s) {
  std::lock_guard lock{mutex_};
  auto ev = events_.find(static_cast<std::uint64_t>(e));
  if (ev == events_.end()) return invalid("unknown event");
  auto st = streams_.find(static_cast<std::uint64_t>(s));
  if (st == streams_.end()) return invalid("unknown stream");
  // As in CUDA, an event is recorded on a stream of its own device.
  if (ev->second.ordinal != st->second.ordinal) return invalid("the event and the stream are on different devices");
  auto generation = ++ev->second.recorded;
  st->second.ops.push_back({.what = op::kind::record, .event = ev->first, .generation = generation});
  return {};
}

result<event_state> fake_device::query(event_handle e) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(e));
  if (it == events_.end()) return invalid("unknown event");
  if (!it->second.failed.empty()) return error{errc::unavailable, it->second.failed};
  return it->second.reached >= it->second.recorded ? event_state::done : event_state::pending;
}

result<void> fake_device::stream_wait(stream_handle s, event_handle e) {
  std::lock_guard lock{mutex_};
  auto ev = events_.find(static_cast<std::uint64_t>(e));
  if (ev == events_.end()) return invalid("unknown event");
  auto st = streams_.find(static_cast<std::uint64_t>(s));
  if (st == streams_.end()) return invalid("unknown stream");
  // CUDA waits for the event's latest record as of this call.
  st->second.ops.push_back({.what = op::kind::wait, .event = ev->first, .generation = ev->second.recorded});
  return {};
}

void fake_device::fail_event(event_handle e, std::string why) {
  std::lock_guard lock{mutex_};
  auto it = events_.find(static_cast<std::uint64_t>(e));
  SLUICE_ASSERT(it != events_.end());
  it->second.failed = std::move(why);
}

bool fake_device::ready(const op& o) const {
  if (o.what != op::kind::wait) return true;
  auto it = events_.find(o.event);
  // A destroyed event no longer holds anyone up.
  return it == events_.end() || it->second.reached >= o.generation;
}

void fake_device::run(const op& o) {
  switch (o.what) {
    case op::kind::copy: std::memmove(o.to, o.from, o.bytes); break;
    case op::kind::record: {
      auto it = events_.find(o.event);
      if (it != events_.end() && it->second.reached < o.generation) it->second.reached = o.generation;
      break;
    }
    case op::kind::wait: break;
  }
}

std::size_t fake_device::advance_locked(std::size_t ops_max) {
  std::size_t ran = 0;
  bool progress = true;
  while (ran < ops_max && progress) {
    progress = false;
    for (auto& [id, s] : streams_) {
      if (ran == ops_max) break;
      if (s.ops.empty() || !ready(s.ops.front())) continue;
      run(s.ops.front());
      s.ops.pop_front();
      ++ran;
      progress = true;
    }
  }
  return ran;
}

std::size_t fake_device::advance(std::size_t ops_max) {
  std::lock_guard lock{mutex_};
  return advance_locked(ops_max);
}

std::size_t fake_device::drain() {
  std::lock_guard lock{mutex_};
  return advance_locked(static_cast<std::size_t>(-1));
}

std::size_t fake_device::queued() const {
  std::lock_guard lock{mutex_};
  std::size_t n = 0;
  for (auto& [id, s] : streams_) n += s.ops.size();
  return n;
}

}  // namespace sluice::gpu
