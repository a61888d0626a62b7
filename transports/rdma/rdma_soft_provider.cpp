// The software provider: one-sided reads between processes of one host,
// emulated with process_vm_readv(2) on the engine's poller thread — the
// reading process copies straight out of the holder's pool, and the
// holder's actor takes no part, as with a real device. A testing aid: it
// is used only when a node's configuration names it ([rdma] device =
// "soft").
//
// The endpoint carries the process id (in the first 4 bytes of the GID,
// followed by a marker); registrations are plain address ranges with
// keys of this provider's own. Faults (soft_options) imitate a failing
// link: a completion with an error, and the pair in the error state, so
// later reads on it are flushed.
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "transports/rdma/rdma_provider.hpp"

namespace sluice::transport::rdma {
namespace {

constexpr char marker[] = "sluice-soft";  // 11 bytes and a NUL: gid[4..15]
/// Reads posted and not yet performed, at most: beyond it posts answer
/// overloaded, as a full send queue would.
constexpr std::size_t queued_reads_max = 4096;

struct pair_state {
  std::uint32_t number = 0;
  pid_t peer = 0;
  bool connected = false;
  bool failed = false;  // the error state: reads are flushed
};

struct pending_read {
  std::shared_ptr<pair_state> pair;
  std::span<std::byte> into;
  std::uint64_t remote_address = 0;
  std::uint64_t work_id = 0;
};

struct shared {
  soft_options options;
  std::mutex mutex;  // guards everything below, and every pair_state
  std::deque<pending_read> queue;
  std::uint64_t posted = 0;
  std::uint32_t next_pair = 1;
  std::uint32_t next_key = 1;
};

class soft_pair final : public provider_pair {
 public:
  soft_pair(std::shared_ptr<shared> s, std::shared_ptr<pair_state> p) : shared_(std::move(s)), pair_(std::move(p)) {}

  queue_pair_endpoint local() const override {
    queue_pair_endpoint e;
    e.qp_number = pair_->number;
    auto pid = static_cast<std::uint32_t>(::getpid());
    std::memcpy(e.gid.data(), &pid, 4);
    std::memcpy(e.gid.data() + 4, marker, sizeof marker);
    return e;
  }

  result<void> connect(const queue_pair_endpoint& peer) override {
    if (std::memcmp(peer.gid.data() + 4, marker, sizeof marker) != 0) {
      return fail(errc::invalid_argument, "the peer's end is not one of the software provider");
    }
    std::uint32_t pid = 0;
    std::memcpy(&pid, peer.gid.data(), 4);
    std::lock_guard lock{shared_->mutex};
    pair_->peer = static_cast<pid_t>(pid);
    pair_->connected = true;
    return {};
  }

  result<void> post_read(std::span<std::byte> into, const memory_key&, std::uint64_t remote_address,
                         std::uint32_t, std::uint64_t work_id) override {
    std::lock_guard lock{shared_->mutex};
    if (!pair_->connected) return fail(errc::invalid_argument, "the queue pair is not connected");
    if (shared_->queue.size() >= queued_reads_max) return fail(errc::overloaded, "the send queue is full");
    shared_->queue.push_back(pending_read{pair_, into, remote_address, work_id});
    return {};
  }

 private:
  std::shared_ptr<shared> shared_;
  std::shared_ptr<pair_state> pair_;
};

/// Performs one read; the pair may go to the error state.
completion perform(shared& s, const pending_read& r, bool inject) {
  completion c{r.work_id, false, {}, 0};
  {
    std::lock_guard lock{s.mutex};
    if (r.pair->failed) {
      c.error = "Work Request Flushed Error";
      return c;
    }
    if (inject) {
      r.pair->failed = true;
      c.error = "remote access error (injected: [rdma] soft_fail_read)";
      return c;
    }
  }
  iovec local{r.into.data(), r.into.size()};
  iovec remote{reinterpret_cast<void*>(r.remote_address), r.into.size()};
  auto n = ::process_vm_readv(r.pair->peer, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(r.into.size())) {
    c.ok = true;
    c.bytes = static_cast<std::uint32_t>(n);
    return c;
  }
  std::string why = n < 0 ? std::strerror(errno) : "a short read";
  std::lock_guard lock{s.mutex};
  r.pair->failed = true;
  c.error = "remote access error: process_vm_readv: " + why;
  return c;
}

class soft_provider final : public provider {
 public:
  explicit soft_provider(soft_options options) : shared_(std::make_shared<shared>()) {
    shared_->options = options;
    // Where Yama restricts ptrace to descendants, let the peers (siblings
    // of this process) read it: that is what registering memory with a
    // device means.
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  }
  std::string name() const override { return "soft"; }
  std::string describe() const override { return "the software provider (process_vm_readv, one host only)"; }

  result<memory_key> register_memory(std::span<std::byte> memory) override {
    std::lock_guard lock{shared_->mutex};
    auto key = shared_->next_key++;
    return memory_key{reinterpret_cast<std::uint64_t>(memory.data()), memory.size(), key, key};
  }

  result<std::unique_ptr<provider_pair>> create_pair() override {
    auto p = std::make_shared<pair_state>();
    {
      std::lock_guard lock{shared_->mutex};
      p->number = shared_->next_pair++;
    }
    return std::unique_ptr<provider_pair>{new soft_pair{shared_, std::move(p)}};
  }

  result<std::vector<completion>> poll(std::size_t max) override {
    std::vector<completion> out;
    while (out.size() < max) {
      pending_read r;
      bool inject = false;
      {
        std::lock_guard lock{shared_->mutex};
        if (shared_->queue.empty()) break;
        r = std::move(shared_->queue.front());
        shared_->queue.pop_front();
        shared_->posted += 1;
        inject = shared_->options.fail_read != 0 && shared_->posted == shared_->options.fail_read;
      }
      // The poller thread is the emulated device: it may take its time.
      if (shared_->options.read_delay.count() > 0) std::this_thread::sleep_for(shared_->options.read_delay);
      out.push_back(perform(*shared_, r, inject));
    }
    return out;
  }

 private:
  std::shared_ptr<shared> shared_;
};

}  // namespace

std::unique_ptr<provider> make_soft_provider(soft_options options) {
  return std::unique_ptr<provider>{new soft_provider{options}};
}

}  // namespace sluice::transport::rdma
