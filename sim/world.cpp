#include "sim/world.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/detail/test_actor_clock.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include <fmt/format.h>

#include "actors/client/client.hpp"
#include "actors/common/actor_sink.hpp"
#include "actors/owner/pool_store.hpp"
#include "sim/sim_rdma.hpp"
#include "actors/master/master.hpp"
#include "actors/owner/owner.hpp"
#include "actors/owner/owner_hooks.hpp"
#include "runtime/wire/codec.hpp"
#include "runtime/assert.hpp"
#include "runtime/gpu/fake_device.hpp"
#include "runtime/storage/identity.hpp"
#include "sim/sim_log.hpp"
#include "sim/sim_transport.hpp"
#include "transports/network.hpp"

namespace sluice::sim {
namespace {

/// The simulated wall clock: virtual time from a fixed epoch (2026-01-01),
/// so TTLs behave the same in every run of a seed.
std::int64_t sim_wall_ms(sim_time now) {
  constexpr std::int64_t epoch_ms = 1'767'225'600'000;
  return epoch_ms + std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
}

constexpr std::uint64_t trace_step = 10;
constexpr std::uint64_t trace_start = 11;
constexpr std::uint64_t trace_crash = 12;
/// Times a node retries writing its identity before it gives up on
/// keeping it (a simulated disk may fail writes).
constexpr int identity_attempts = 8;

const char* kind_name(node_kind k) {
  switch (k) {
    case node_kind::master: return "master";
    case node_kind::owner: return "owner";
    case node_kind::client: return "client";
  }
  return "node";
}

}  // namespace

struct world::node {
  node_kind kind = node_kind::client;
  std::string name;
  std::string address;
  std::uint64_t incarnation = 0;
  bool alive = false;
  sim_disk disk;
  int owner = 0;  // clients: the owner they talk to
  node_id id;     // of the current (or last) incarnation
  /// Clients: what serves the RPC calls on their link, kept across incarnations.
  std::shared_ptr<rpc_served_slot> served = std::make_shared<rpc_served_slot>();
  /// Owners, with world_config::gpu_devices: kept across incarnations, and
  /// declared before the actor system so that it outlives the owner.
  std::unique_ptr<gpu::fake_device> gpu;
  // One incarnation; destroyed in reverse order of declaration matters
  // less than the explicit order in crash().
  std::unique_ptr<sim_store> store;
  std::unique_ptr<actor_sink> sink;
  std::unique_ptr<transport::network> net;
  std::unique_ptr<caf::actor_system_config> system_config;
  std::unique_ptr<caf::actor_system> system;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor actor;
  std::unique_ptr<transport::rdma_path> rdma;  // owners, with world_config::rdma
};

world::world(world_config config)
    : config_(std::move(config)),
      sched_rng_(rng{config_.seed}.fork(1)),
      net_rng_(rng{config_.seed}.fork(2)),
      fault_rng_(rng{config_.seed}.fork(3)),
      workload_rng_(rng{config_.seed}.fork(4)),
      identity_rng_(rng{config_.seed}.fork(5)),
      trace_(config_.keep_trace) {
  network_ = std::make_unique<network>(net_rng_, config_.faults, trace_);
  network_->set_clock([this] { return now_; });
  faults_ = std::make_unique<sim_fault_sites>(fault_rng_.fork(7), config_.faults.buggify);
  if (config_.rdma) rdma_ = std::make_unique<rdma_fabric>(fault_rng_.fork(8), config_.rdma_fail_pm);
  auto add = [this](node_kind kind, std::string name) {
    auto n = std::make_unique<node>();
    n->kind = kind;
    n->address = "sim://" + name;
    n->name = std::move(name);
    nodes_.push_back(std::move(n));
  };
  add(node_kind::master, "master");
  for (int i = 0; i < config_.owners; ++i) add(node_kind::owner, fmt::format("owner-{}", i));
  for (int i = 0; i < config_.clients; ++i) add(node_kind::client, fmt::format("client-{}", i));
  for (int i = 0; i < node_count(); ++i) start(i);
}

world::~world() {
  for (int i = 0; i < node_count(); ++i) {
    if (nodes_[static_cast<std::size_t>(i)]->alive) crash(i);
  }
}

node_config world::config_for(node_kind kind) const {
  node_config cfg;
  cfg.master.placement = config_.placement;
  cfg.owner.master = "sim://master";
  cfg.owner.capacity_bytes = config_.owner_capacity != 0 ? config_.owner_capacity : 256ULL << 20;
  cfg.owner.max_value_bytes = 1ULL << 20;
  cfg.owner.commit_report_delay = config_.commit_report_delay;
  // Small pieces, so the workload's values (up to 100 KiB) move between
  // owners in several pieces in flight at once.
  cfg.owner.transfer_chunk_bytes = 16ULL << 10;
  cfg.owner.transfer_window = 3;
  cfg.master.mq_orphan_grace = config_.mq_orphan_grace;
  cfg.master.repair_after = config_.repair_after;
  if (config_.no_relays) std::erase(cfg.links.order, std::string{"relay"});
  cfg.owner.cache_remote = config_.cache_remote;
  if (config_.gpu_devices > 0) {
    cfg.owner.gpu.enabled = true;
    cfg.owner.gpu.devices.clear();
    for (std::uint32_t d = 0; d < config_.gpu_devices; ++d) cfg.owner.gpu.devices.push_back(d);
    cfg.owner.gpu.capacity_bytes = config_.gpu_capacity;
  }
  (void)kind;
  return cfg;
}

node_kind world::kind_of(int node) const { return nodes_.at(static_cast<std::size_t>(node))->kind; }
bool world::alive(int node) const { return nodes_.at(static_cast<std::size_t>(node))->alive; }
std::uint64_t world::incarnation(int node) const {
  return nodes_.at(static_cast<std::size_t>(node))->incarnation;
}
caf::actor world::actor_of(int node) const { return nodes_.at(static_cast<std::size_t>(node))->actor; }

node_id world::id_of(int node) const { return nodes_.at(static_cast<std::size_t>(node))->id; }

rpc_served_slot& world::served_slot(int node) { return *nodes_.at(static_cast<std::size_t>(node))->served; }
const std::string& world::name_of(int node) const { return nodes_.at(static_cast<std::size_t>(node))->name; }

const gpu::fake_device* world::gpu_of(int node) const { return nodes_.at(static_cast<std::size_t>(node))->gpu.get(); }

std::pair<std::uint64_t, std::uint64_t> world::rdma_reads() const noexcept {
  if (!rdma_) return {0, 0};
  return {rdma_->reads_ok(), rdma_->reads_failed()};
}

std::shared_ptr<object_store> world::pool_for(node& n, int index, std::uint64_t capacity_bytes) {
  pool_options options;
  options.name = "sluice-sim-" + n.name;
  options.pool_bytes = capacity_bytes;
  options.segment_bytes = std::min<std::uint64_t>(capacity_bytes, 64ULL << 20);
  auto pool = pool_store::create(options);
  SLUICE_ASSERT(pool.ok());
  std::vector<std::span<std::byte>> segments;
  for (auto& s : (*pool)->segments()) segments.emplace_back(const_cast<std::byte*>(s.base), s.size_bytes);
  n.rdma = rdma_->attach(index, n.incarnation, std::move(segments), n.sink.get());
  return std::shared_ptr<object_store>{std::move(*pool)};
}

void world::start(int index) {
  auto& n = *nodes_.at(static_cast<std::size_t>(index));
  n.incarnation += 1;
  n.store = std::make_unique<sim_store>(n.disk, faults_.get());
  result<node_id> id = error{errc::internal, "no attempt"};
  for (int attempt = 0; attempt < identity_attempts && !id; ++attempt) {
    id = load_or_create_node_id(*n.store, identity_rng_);
  }
  // A disk that refuses every write leaves the node with an identity that
  // will not survive its next crash: it still runs.
  node_id self = id ? *id : node_id{identity_rng_.next() | 1};
  n.id = self;

  n.sink = std::make_unique<actor_sink>(get_logger(kind_name(n.kind)));
  n.net = std::make_unique<transport::network>();
  n.net->add(1, std::make_unique<sim_transport>(*network_, index));
  network_->attach(index, n.sink.get());
  if (n.kind != node_kind::client) (void)n.net->listen(n.address);

  n.system_config = std::make_unique<caf::actor_system_config>();
  n.system_config->set("scheduler.policy", caf::atom("testing"));
  n.system = std::make_unique<caf::actor_system>(*n.system_config);
  n.sched = &dynamic_cast<caf::scheduler::test_coordinator&>(n.system->scheduler());
  n.sched->clock().current_time = now_;

  auto cfg = config_for(n.kind);
  endpoint::identity me{self, role::unknown, n.name, n.kind == node_kind::client ? "" : n.address};
  switch (n.kind) {
    case node_kind::master: {
      me.node_role = role::master;
      auto seed = rng{config_.seed}.fork(100 + n.incarnation).next();
      master_deps deps{me, cfg.master, n.net.get(), faults_.get(), config_.master_forgets ? nullptr : n.store.get(),
                       seed, [this] { return sim_wall_ms(now_); },
                       [this](const std::string& key) {
                         if (config_.on_forgotten) config_.on_forgotten(key, now_);
                       }};
      deps.on_repair = [this](bool made) { (made ? repair_copies_ : repair_copies_failed_) += 1; };
      deps.on_copy_evicted = [this](const std::string& key) {
        if (config_.on_copy_evicted) config_.on_copy_evicted(key, now_);
      };
      deps.on_member_down = [this](node_id id, const std::string& why) {
        if (!config_.on_member_down) return;
        int node = -1;
        for (int i = 0; i < node_count() && node < 0; ++i) {
          if (nodes_[static_cast<std::size_t>(i)]->alive && id_of(i) == id) node = i;
        }
        config_.on_member_down(node, why, now_);
      };
      deps.plant_mq_forget_acks_on_move = config_.mq_forgets_acks;
      deps.plant_mq_keep_consumed_payloads = config_.mq_leaks_payloads;
      deps.plant_mq_free_recalled_at_once = config_.mq_frees_recalled;
      deps.plant_no_repair = config_.no_repair;
      auto master = spawn_master(*n.system, std::move(deps));
      // The simulated disk holds only what the master wrote: it can't be corrupt.
      SLUICE_ASSERT(master.ok());
      n.actor = caf::actor_cast<caf::actor>(*master);
      break;
    }
    case node_kind::owner: {
      me.node_role = role::owner;
      auto store = config_.make_store ? config_.make_store(cfg.owner.capacity_bytes)
                   : rdma_              ? pool_for(n, index, cfg.owner.capacity_bytes)
                                        : std::make_shared<memory_store>(cfg.owner.capacity_bytes);
      auto fast = std::make_shared<fast_index>();
      auto routes = std::make_shared<rpc_routes>([](transport::link_id) { return true; });
      // No poller goes idle here: every request is a chance to report.
      auto hooks = make_owner_hooks({.self = self,
                                     .index = fast,
                                     .store = store,
                                     .routes = routes,
                                     .now = [this] { return now_; },
                                     .report_commits = [sink = n.sink.get()] { sink->post(caf::make_message(commits_atom::value)); },
                                     .notify = commit_notify::after_each_request});
      network_->set_fast_path(index, hooks.fast_path);
      // The poller's relay runs here too, between the owner's clients.
      network_->set_relay(index, [this, relay = hooks.relay](transport::link_id from, const wire::inbound_frame& frame) {
        auto routed = relay(from, frame);
        if (config_.rpc_relay_misroutes && routed && routed->to != 0) {
          auto head = wire::peek(frame);
          if (head && head->rpc && head->request_id != 0 && head->reply_to == 0) routed->to = from;
        }
        return routed;
      });
      if (config_.gpu_devices > 0 && !n.gpu) {
        n.gpu = std::make_unique<gpu::fake_device>(
            gpu::fake_options{.device_count = config_.gpu_devices, .memory_bytes = 2 * config_.gpu_capacity});
      }
      n.actor = caf::actor_cast<caf::actor>(
          spawn_owner(*n.system, owner_deps{me, cfg.owner, cfg.links, n.net.get(), faults_.get(), store,
                                             identity_rng_.next(), fast, routes, n.rdma.get(), n.gpu.get()}));
      break;
    }
    case node_kind::client: {
      me.node_role = role::client;
      auto client = index - client_index(0);
      n.owner = static_cast<std::size_t>(client) < config_.client_owners.size()
                    ? config_.client_owners[static_cast<std::size_t>(client)]
                    : static_cast<int>(workload_rng_.uniform(static_cast<std::uint64_t>(config_.owners)));
      auto owner = "sim://owner-" + std::to_string(n.owner);
      n.actor = caf::actor_cast<caf::actor>(
          spawn_client(*n.system, client_deps{me, {owner}, n.net.get(), faults_.get(), std::chrono::seconds{2}, n.served}));
      break;
    }
  }
  n.sink->bind(n.actor);
  n.alive = true;
  trace_.add(now_, trace_start, static_cast<std::uint64_t>(index), n.incarnation, self.value, [&] {
    return fmt::format("{} {} starts (incarnation {}, id {})", format_time(now_), n.name,
                       n.incarnation, self.to_string());
  });
}

void world::crash(int index) {
  auto& n = *nodes_.at(static_cast<std::size_t>(index));
  if (!n.alive) return;
  trace_.add(now_, trace_crash, static_cast<std::uint64_t>(index), n.incarnation, 0, [&] {
    return fmt::format("{} {} crashes", format_time(now_), n.name);
  });
  network_->detach(index);
  n.alive = false;
  // The test scheduler's system only goes away once its actors are gone:
  // kill the role actor and let the queue run dry. Nothing it does now
  // reaches the network (detached) or the workload (stale incarnation).
  caf::anon_send_exit(n.actor, caf::exit_reason::kill);
  n.sched->run();
  n.actor = nullptr;
  if (rdma_) rdma_->detach(index);
  n.rdma.reset();
  n.sink.reset();
  n.system.reset();
  n.system_config.reset();
  n.sched = nullptr;
  n.net.reset();
  n.store.reset();
  n.disk.crash(fault_rng_);
}

void world::restart(int index, bool wipe_storage) {
  crash(index);
  auto& n = *nodes_.at(static_cast<std::size_t>(index));
  if (wipe_storage) n.disk.wipe();
  if (wipe_storage && n.kind == node_kind::master) master_wipes_ += 1;
  start(index);
}

std::uint64_t world::master_epoch() const {
  auto& n = *nodes_.at(static_cast<std::size_t>(master_index()));
  // A crash ends an incarnation; a discard reloads within one. While the
  // master is down a request may still be answered by nobody, so a crash
  // counts from the moment it happens.
  return 2 * n.incarnation + (n.alive ? 0 : 1) + n.disk.discards;
}

void world::heal() {
  network_->heal_all();
  faults_->disable();
}

void world::at(sim_time when, std::function<void()> action) {
  timers_.emplace(std::make_pair(std::max(when, now_), next_timer_++), std::move(action));
}

bool world::run_one_job() {
  // Which node runs, and which of its actors: both drawn from the
  // scheduling stream, so every interleaving a seed picks is replayable.
  int ready[256];
  int count = 0;
  for (int i = 0; i < node_count() && count < 256; ++i) {
    auto& n = *nodes_[static_cast<std::size_t>(i)];
    if (n.alive && n.sched->has_job()) ready[count++] = i;
  }
  if (count == 0) return false;
  int chosen = ready[sched_rng_.uniform(static_cast<std::uint64_t>(count))];
  auto& jobs = nodes_[static_cast<std::size_t>(chosen)]->sched->jobs;
  auto pick = sched_rng_.uniform(jobs.size());
  if (pick != 0) std::swap(jobs.front(), jobs[pick]);
  trace_.add(now_, trace_step, static_cast<std::uint64_t>(chosen), pick, jobs.size(), [&] {
    return fmt::format("{} step: {} runs job {} of {}", format_time(now_), name_of(chosen), pick,
                       jobs.size());
  });
  {
    log_scope scope{now_, name_of(chosen)};
    nodes_[static_cast<std::size_t>(chosen)]->sched->run_once();
  }
  ++steps_;
  return true;
}

std::optional<sim_time> world::next_due() const {
  std::optional<sim_time> next = network_->next_event();
  auto consider = [&next](sim_time t) {
    if (!next || t < *next) next = t;
  };
  for (auto& n : nodes_) {
    if (!n->alive) continue;
    auto& schedule = n->sched->clock().schedule();
    if (!schedule.empty()) consider(schedule.begin()->first);
  }
  if (!timers_.empty()) consider(timers_.begin()->first.first);
  return next;
}

void world::advance_to(sim_time t) {
  if (t > now_) now_ = t;
  network_->deliver_due(now_);
  for (auto& n : nodes_) {
    if (!n->alive) continue;
    auto& clock = n->sched->clock();
    if (clock.current_time > now_) continue;
    // Also when the time is the same: a timer due now (a zero delay) fires.
    // A clock with nothing due by now only moves its hand.
    auto& schedule = clock.schedule();
    if (schedule.empty() || schedule.begin()->first > now_) {
      clock.current_time = now_;
      continue;
    }
    clock.advance_time(now_ - clock.current_time);
  }
  while (!timers_.empty() && timers_.begin()->first.first <= now_) {
    auto action = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    action();
  }
}

void world::run_until(sim_time until) {
  while (true) {
    if (run_one_job()) continue;
    auto next = next_due();
    if (!next || *next > until) {
      if (until > now_) advance_to(until);
      if (!run_one_job()) return;
      continue;
    }
    advance_to(*next);
  }
}

}  // namespace sluice::sim
