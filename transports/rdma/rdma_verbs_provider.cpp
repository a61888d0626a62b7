// The provider on a real device: context and queue_pair (libibverbs, or
// the build without it, which reports that at run time).
#include "transports/rdma/rdma_provider.hpp"

namespace sluice::transport::rdma {
namespace {

class verbs_pair final : public provider_pair {
 public:
  explicit verbs_pair(std::unique_ptr<queue_pair> qp) : qp_(std::move(qp)) {}
  queue_pair_endpoint local() const override { return qp_->local(); }
  result<void> connect(const queue_pair_endpoint& peer) override { return qp_->connect(peer); }
  result<void> post_read(std::span<std::byte> into, const memory_key& local_key, std::uint64_t remote_address,
                         std::uint32_t remote_rkey, std::uint64_t work_id) override {
    return qp_->post_read(into, local_key, remote_address, remote_rkey, work_id);
  }

 private:
  std::unique_ptr<queue_pair> qp_;
};

class verbs_provider final : public provider {
 public:
  explicit verbs_provider(std::unique_ptr<context> c) : context_(std::move(c)) {}
  std::string name() const override { return "verbs"; }
  std::string describe() const override {
    return "device " + context_->device().name + " port " + std::to_string(context_->device().port);
  }
  result<memory_key> register_memory(std::span<std::byte> memory) override {
    return context_->register_memory(memory);
  }
  result<std::unique_ptr<provider_pair>> create_pair() override {
    auto qp = context_->create_queue_pair();
    if (!qp) return qp.error();
    return std::unique_ptr<provider_pair>{new verbs_pair{std::move(*qp)}};
  }
  result<std::vector<completion>> poll(std::size_t max) override { return context_->poll(max); }

 private:
  std::unique_ptr<context> context_;
};

}  // namespace

result<std::unique_ptr<provider>> open_verbs_provider() {
  auto c = context::open();
  if (!c) return c.error();
  return std::unique_ptr<provider>{new verbs_provider{std::move(*c)}};
}

}  // namespace sluice::transport::rdma
