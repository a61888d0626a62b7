#include "transports/shm/channel.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "transports/shm/waiter.hpp"

namespace sluice::transport::shm {
namespace {

template <class T>
void put(std::vector<std::byte>& out, T value) {
  auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <class T>
bool take(std::span<const std::byte>& in, T& value) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(&value, in.data(), sizeof(T));
  in = in.subspan(sizeof(T));
  return true;
}

std::string os_error(const char* what) {
  return std::string{what} + ": " + std::strerror(errno);
}

}  // namespace

result<std::unique_ptr<channel_memory>> channel_memory::create(std::uint32_t ring_bytes) {
  auto area = ring_area_bytes(ring_bytes);
  unique_fd fd{::memfd_create("sluice-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (!fd) return fail(errc::unavailable, os_error("memfd_create"));
  if (::ftruncate(fd.get(), static_cast<off_t>(2 * area)) != 0) {
    return fail(errc::no_capacity, os_error("ftruncate of the channel"));
  }
  // Sealed so the client can trust the size (no SIGBUS from a truncate).
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  void* base = ::mmap(nullptr, 2 * area, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return fail(errc::no_capacity, os_error("mmap of the channel"));
  std::unique_ptr<channel_memory> out{
      new channel_memory{std::move(fd), static_cast<std::byte*>(base), 2 * area, ring_bytes}};
  if (auto r = ring::format(out->requests_area(), ring_bytes); !r) return r.error();
  if (auto r = ring::format(out->responses_area(), ring_bytes); !r) return r.error();
  return out;
}

result<std::unique_ptr<channel_memory>> channel_memory::attach(unique_fd fd, std::uint32_t ring_bytes) {
  if (ring_bytes < ring_capacity_bytes_min || ring_bytes > ring_capacity_bytes_max) {
    return fail(errc::protocol, "the owner announced rings of " + std::to_string(ring_bytes) + " bytes");
  }
  auto area = ring_area_bytes(ring_bytes);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != 2 * area) {
    return fail(errc::protocol, "the channel memfd does not have the announced size");
  }
  void* base = ::mmap(nullptr, 2 * area, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return fail(errc::no_capacity, os_error("mmap of the channel"));
  std::unique_ptr<channel_memory> out{
      new channel_memory{std::move(fd), static_cast<std::byte*>(base), 2 * area, ring_bytes}};
  if (auto r = ring::attach(out->requests_area()); !r) return r.error();
  if (auto r = ring::attach(out->responses_area()); !r) return r.error();
  return out;
}

channel_memory::~channel_memory() { ::munmap(base_, size_); }

std::span<std::byte> channel_memory::requests_area() const noexcept {
  return {base_, size_ / 2};
}

std::span<std::byte> channel_memory::responses_area() const noexcept {
  return {base_ + size_ / 2, size_ / 2};
}

std::vector<std::byte> encode_greeting(const greeting& g) {
  std::vector<std::byte> out;
  put<std::uint32_t>(out, greeting_magic);
  put<std::uint16_t>(out, greeting_version);
  put<std::uint16_t>(out, 0);
  put<std::uint32_t>(out, g.ring_bytes);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(g.segment_bytes.size()));
  for (auto bytes : g.segment_bytes) put<std::uint64_t>(out, bytes);
  return out;
}

result<greeting> decode_greeting(std::span<const std::byte> in) {
  std::uint32_t magic = 0, count = 0;
  std::uint16_t version = 0, reserved = 0;
  greeting g;
  if (!take(in, magic) || magic != greeting_magic) {
    return fail(errc::protocol, "the peer is not a Sluice owner (bad greeting)");
  }
  if (!take(in, version) || version != greeting_version || !take(in, reserved)) {
    return fail(errc::protocol, "the owner speaks shm greeting version " + std::to_string(version));
  }
  if (!take(in, g.ring_bytes) || !take(in, count) || count > greeting_segments_max ||
      in.size() != count * sizeof(std::uint64_t)) {
    return fail(errc::protocol, "malformed shm greeting");
  }
  g.segment_bytes.resize(count);
  for (auto& bytes : g.segment_bytes) take(in, bytes);
  return g;
}

bool notify_poller(ring& r, int doorbell_fd) noexcept {
  if (!take_sleeper(r.consumer_wake_word())) return false;  // the poller spins, or another rang
  std::uint64_t one = 1;
  // A full eventfd counter already means "wake up"; nothing to do then.
  [[maybe_unused]] auto n = ::write(doorbell_fd, &one, sizeof one);
  return true;
}

}  // namespace sluice::transport::shm
