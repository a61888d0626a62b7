// A build without libibverbs: no device is ever usable, and says why.
#include "transports/rdma/rdma.hpp"

namespace sluice::transport::rdma {

namespace {
constexpr const char* why = "this build of Sluice has no RDMA support (libibverbs was not found when it was built)";
}  // namespace

probe_result probe() { return probe_result{{}, why}; }

struct context::handles {};
struct queue_pair::handles {};

context::context(device_info device, std::unique_ptr<handles> h) : device_(std::move(device)), handles_(std::move(h)) {}
context::~context() = default;
result<std::unique_ptr<context>> context::open(std::uint32_t) { return fail(errc::unavailable, why); }
result<memory_key> context::register_memory(std::span<std::byte>) { return fail(errc::unavailable, why); }
result<std::unique_ptr<queue_pair>> context::create_queue_pair(std::uint32_t) { return fail(errc::unavailable, why); }
result<std::vector<completion>> context::poll(std::size_t) { return fail(errc::unavailable, why); }

queue_pair::queue_pair(context& owner, std::unique_ptr<handles> h) : owner_(owner), handles_(std::move(h)) {}
queue_pair::~queue_pair() = default;
queue_pair_endpoint queue_pair::local() const { return {}; }
result<void> queue_pair::connect(const queue_pair_endpoint&) { return fail(errc::unavailable, why); }
result<void> queue_pair::post_read(std::span<std::byte>, const memory_key&, std::uint64_t, std::uint32_t, std::uint64_t) {
  return fail(errc::unavailable, why);
}
result<void> queue_pair::post_write(std::span<const std::byte>, const memory_key&, std::uint64_t, std::uint32_t,
                                    std::uint64_t) {
  return fail(errc::unavailable, why);
}

}  // namespace sluice::transport::rdma
