#include "api/src/node_host.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <filesystem>

#include "actors/client/client.hpp"
#include "actors/master/master.hpp"
#include "actors/owner/owner.hpp"
#include "actors/owner/owner_hooks.hpp"
#include "runtime/cpus.hpp"
#include "runtime/gpu/device.hpp"
#include "runtime/rng.hpp"
#include "runtime/storage/dir_lock.hpp"
#include "runtime/storage/identity.hpp"
#include "runtime/storage/sqlite_store.hpp"
#include "runtime/units.hpp"
#include "actors/owner/pool_store.hpp"
#include "transports/rdma/rdma.hpp"
#include "transports/rdma/rdma_provider.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/shm_server.hpp"
#include "transports/tcp/tcp_address.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace sluice {
namespace {

constexpr std::uint16_t tcp_tag = 1;
constexpr std::uint16_t inproc_tag = 2;
constexpr std::uint16_t shm_tag = 3;
/// How long a stopping node waits for its role to finish saying goodbye.
constexpr std::chrono::seconds stop_timeout{2};
/// How long a question to the node's own actor may take (it answers from
/// its state, at once, unless it is stuck).
constexpr std::chrono::seconds ask_timeout{5};


std::string node_name(const node_config& cfg, std::string_view role_name, const std::string& address) {
  if (!cfg.node.name.empty()) return cfg.node.name;
  return std::string{role_name} + (address.empty() ? "" : "@" + address);
}

/// Creates the master's data directory and takes its lock: one master per
/// directory.
result<std::unique_ptr<dir_lock>> open_master_dir(const master_section& cfg) {
  std::error_code ec;
  std::filesystem::create_directories(cfg.data_dir, ec);
  if (ec) {
    return fail(errc::unavailable, "cannot create the master's data directory '" + cfg.data_dir + "': " + ec.message());
  }
  return dir_lock::acquire(cfg.data_dir);
}

result<std::unique_ptr<durable_store>> open_master_store(const master_section& cfg) {
  auto path = (std::filesystem::path{cfg.data_dir} / "master.db").string();
  auto store = sqlite_store::open(path, cfg.fsync);
  if (!store) return store.error();
  return std::unique_ptr<durable_store>{std::move(*store)};
}

/// The provider the configuration asks for, or why there is none (said
/// once in the log by the caller).
result<std::unique_ptr<transport::rdma::provider>> rdma_provider(const rdma_section& cfg) {
  if (cfg.device == "off") return fail(errc::unavailable, "rdma is off ([rdma] device = \"off\")");
  if (cfg.device == "soft") {
    transport::rdma::soft_options options;
    options.fail_read = cfg.soft_fail_read;
    options.read_delay = cfg.soft_read_delay;
    return transport::rdma::make_soft_provider(options);
  }
  auto found = transport::rdma::probe();
  if (!found.usable()) return fail(errc::unavailable, found.why_not);
  return transport::rdma::open_verbs_provider();
}

}  // namespace

std::uint32_t scheduler_threads(std::uint32_t configured) {
  if (configured > 0) return configured;
  return static_cast<std::uint32_t>(std::clamp(cpus_allowed(2), 1, 2));
}

node_runtime::node_runtime() = default;
// The system goes first (declared last) and waits for every actor of it
// to finish its last messages; then its config.
node_runtime::~node_runtime() = default;

void node_host::make_system(std::uint32_t threads, const placement& where) {
  runtime_ = where.runtime != nullptr ? where.runtime : std::make_shared<node_runtime>();
  if (runtime_->system == nullptr) {
    // The actor system keeps a reference to its config: both live in the runtime.
    runtime_->config = std::make_unique<caf::actor_system_config>();
    runtime_->config->set("scheduler.max-threads", static_cast<std::size_t>(scheduler_threads(threads)));
    // Work sharing parks idle workers on a condition variable and wakes one
    // per message; CAF's default work stealing sleeps 50 us between polls of
    // an idle queue, which costs every actor hop tens of microseconds here
    // (measured with bench/run kv: put and get p50 about 3x lower).
    runtime_->config->set("scheduler.policy", caf::atom("sharing"));
    runtime_->system = std::make_unique<caf::actor_system>(*runtime_->config);
  }
}

caf::actor_system& node_host::system() const { return *runtime_->system; }

result<std::unique_ptr<node_host>> node_host::prepare(const node_config& cfg, role r,
                                                      placement where) {
  std::unique_ptr<node_host> host{new node_host{}};
  host->id_ = node_id{entropy_seed()};
  host->role_ = r;
  host->sink_ = std::make_unique<actor_sink>(get_logger(to_string(r)));
  transport::transport_limits limits;
  limits.frame.max_envelope_bytes = cfg.wire.max_envelope_bytes;
  limits.frame.max_payload_bytes = cfg.wire.max_payload_bytes;
  host->net_ = std::make_unique<transport::network>();
  auto tcp = std::make_unique<transport::tcp_transport>(tcp_tag, *host->sink_, limits);
  host->tcp_ = tcp.get();
  host->net_->add(tcp_tag, std::move(tcp));
  if (where.hub != nullptr) {
    host->net_->add(inproc_tag, std::make_unique<transport::inproc_transport>(
                                    inproc_tag, *host->sink_, *where.hub, limits));
  }
  host->limits_ = limits;
  return host;
}

/// The owner's shared-memory side: its pool, and the shm transport that
/// hands the pool to local clients. Returns the store values go to.
result<std::shared_ptr<object_store>> node_host::open_pool(const node_config& cfg) {
  if (cfg.owner.shm == "off") return std::shared_ptr<object_store>{std::make_shared<memory_store>(cfg.owner.capacity_bytes)};
  pool_options options;
  options.name = "sluice-pool";
  options.pool_bytes = cfg.owner.capacity_bytes;
  options.segment_bytes = std::min(cfg.owner.segment_bytes, cfg.owner.capacity_bytes);
  options.huge_pages = cfg.owner.huge_pages;
  options.prefault = cfg.owner.prefault == prefault_policy::background ? prefault_mode::background
                                                                       : prefault_mode::none;
  auto store = pool_store::create(options);
  if (!store) return store.error();
  transport::shm_server_options shm;
  for (auto& s : (*store)->segments()) {
    shm.segments.push_back({s.fd, s.size_bytes, s.base});
    // Mapped writable: the rdma path reads peers' values into it.
    pool_segments_.emplace_back(const_cast<std::byte*>(s.base), s.size_bytes);
  }
  // The fast path shares the store with the owner actor (it is thread-safe).
  // The owner actor's clock is the steady clock: the fast path checks the
  // lease against the same one.
  std::shared_ptr<pool_store> pool{std::move(*store)};
  std::shared_ptr<object_store> values = pool;
  auto hooks = make_owner_hooks({.self = id_,
                                 .index = index_,
                                 .store = values,
                                 .routes = routes_,
                                 .now = [] { return std::chrono::steady_clock::now(); },
                                 .report_commits = [sink = sink_.get()] { sink->post(caf::make_message(commits_atom::value)); },
                                 .notify = commit_notify::when_idle});
  shm.fast_path = hooks.fast_path;
  shm.on_idle = hooks.on_idle;
  shm.relay = hooks.relay;
  // Answers to callers over TCP leave the poller through the network.
  auto onward = [net = net_.get()](transport::link_id to, wire::outbound_frame frame) {
    return net->send(to, std::move(frame));
  };
  shm.relay_onward = onward;
  // Clients over TCP take the same fast path and relay, on the tcp
  // transport's thread.
  tcp_->set_fast_path(shm.fast_path, shm.on_idle);
  tcp_->set_relay(hooks.relay, onward);
  net_->add(shm_tag, std::make_unique<transport::shm_server>(shm_tag, *sink_, limits_, shm));
  // Values that arrive over TCP land in the pool, where they are kept.
  tcp_->set_payload_allocator(pool->payload_allocator());
  shm_address_ = cfg.owner.shm == "auto" ? "@sluice-" + address_ : cfg.owner.shm;
  if (auto bound = net_->listen("shm://" + shm_address_); !bound) {
    return fail(bound.code(), "cannot open the shm socket " + shm_address_ + ": " + bound.error().message());
  }
  return values;
}

transport::rdma_path* node_host::open_rdma(const node_config& cfg) {
  auto log = get_logger("rdma");
  constexpr const char* over_tcp = "owners move values between hosts over tcp";
  auto provider = rdma_provider(cfg.rdma);
  if (!provider) {
    log->info("{}; {}", provider.error().message(), over_tcp);
    return nullptr;
  }
  if (pool_segments_.empty()) {
    log->info("this owner has no shared-memory pool to register ([owner] shm = \"off\"); {}", over_tcp);
    return nullptr;
  }
  auto soft = (*provider)->name() == "soft";
  auto engine = std::make_unique<transport::rdma::rdma_engine>(
      std::move(*provider), [sink = sink_.get()](transport::rdma_completion c) {
        sink->post(caf::make_message(rdma_atom::value, c.work_id, c.ok, std::move(c.error)));
      });
  std::uint64_t registered = 0;
  for (std::uint32_t i = 0; i < pool_segments_.size(); ++i) {
    if (auto ok = engine->add_segment(i, pool_segments_[i]); !ok) {
      log->info("{}: registering the pool failed: {}; {}", engine->describe(), ok.error().message(), over_tcp);
      return nullptr;
    }
    registered += pool_segments_[i].size();
  }
  if (soft) {
    log->info("{} ([rdma] device = \"soft\", a testing aid): owners on this host move values over it ({} pool "
              "segments, {} registered)",
              engine->describe(), pool_segments_.size(), format_size(registered));
  } else {
    log->info("{}: owners move values between hosts over rdma ({} pool segments, {} registered)", engine->describe(),
              pool_segments_.size(), format_size(registered));
  }
  rdma_ = std::move(engine);
  return rdma_.get();
}

result<void> node_host::listen(const node_config& cfg, role r, const placement& where) {
  std::string address = cfg.node.listen;
  if (address.empty()) address = r == role::master ? default_master_listen : default_owner_listen;
  auto bound = net_->listen(address);
  if (!bound) return bound.error();
  address_ = transport::network::display(*bound);
  advertise_ = !cfg.node.advertise.empty() ? cfg.node.advertise
               : transport::split_address(*bound).scheme == "tcp" ? transport::reachable_address(address_)
                                                                  : address_;
  if (where.hub != nullptr && !where.inproc_name.empty()) {
    auto named = net_->listen("inproc://" + where.inproc_name);
    if (!named) return named.error();
  }
  return {};
}

result<std::unique_ptr<node_host>> node_host::start_master(const node_config& cfg, placement where) {
  auto host = prepare(cfg, role::master, where);
  if (!host) return host;
  auto& h = **host;
  // Listening first: a bad address is refused before anything is written.
  if (auto ok = h.listen(cfg, role::master, where); !ok) return ok.error();
  if (!cfg.master.data_dir.empty()) {
    auto lock = open_master_dir(cfg.master);
    if (!lock) return lock.error();
    h.dir_lock_ = std::move(*lock);
    auto store = open_master_store(cfg.master);
    if (!store) return store.error();
    h.store_ = std::move(*store);
    h.data_dir_ = cfg.master.data_dir;
    // A master with a data directory keeps its id across restarts.
    rng random{entropy_seed()};
    auto id = load_or_create_node_id(*h.store_, random);
    if (!id) return id.error();
    h.id_ = *id;
  }
  h.make_system(cfg.node.threads, where);
  master_deps deps;
  deps.identity = {h.id_, role::master, node_name(cfg, "master", h.advertise_), h.advertise_};
  deps.config = cfg.master;
  deps.net = h.net_.get();
  deps.seed = cfg.node.seed != 0 ? cfg.node.seed : entropy_seed();
  deps.store = h.store_.get();
  deps.wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  master_recovery recovered;
  auto started = std::chrono::steady_clock::now();
  auto actor = spawn_master(h.system(), std::move(deps), &recovered);
  if (!actor) return actor.error();
  if (h.store_) {
    auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
    get_logger("master")->info("recovered {} objects and {} owners from {} in {}", recovered.objects,
                               recovered.members, cfg.master.data_dir, format_duration(took));
  }
  h.actor_ = caf::actor_cast<caf::actor>(*actor);
  h.sink_->bind(h.actor_);
  return host;
}

result<std::unique_ptr<node_host>> node_host::start_owner(const node_config& cfg, placement where) {
  if (cfg.owner.master.empty()) {
    return fail(errc::invalid_argument, "an owner needs the master's address ([owner] master, or --master)");
  }
  auto host = prepare(cfg, role::owner, where);
  if (!host) return host;
  auto& h = **host;
  if (auto ok = h.listen(cfg, role::owner, where); !ok) return ok.error();
  h.make_system(cfg.node.threads, where);
  owner_deps deps;
  deps.identity = {h.id_, role::owner, node_name(cfg, "owner", h.advertise_), h.advertise_};
  deps.config = cfg.owner;
  deps.links = cfg.links;
  deps.net = h.net_.get();
  h.index_ = std::make_shared<fast_index>();
  // Large rpc payloads go through the pool to the peers that map it.
  h.routes_ = std::make_shared<rpc_routes>([](transport::link_id link) { return transport::link_tag(link) == shm_tag; });
  auto store = h.open_pool(cfg);
  if (!store) return store.error();
  deps.store = std::move(*store);
  deps.rdma = h.open_rdma(cfg);
  // The CUDA runtime (or this build's stand-in) only when pools are asked
  // for: an owner without [owner.gpu] never touches the GPU.
  if (cfg.owner.gpu.enabled) h.gpu_ = gpu::make_cuda_device();
  deps.gpu = h.gpu_.get();
  deps.incarnation = entropy_seed();
  deps.index = h.index_;
  deps.routes = h.routes_;
  h.actor_ = caf::actor_cast<caf::actor>(spawn_owner(h.system(), std::move(deps)));
  h.sink_->bind(h.actor_);
  return host;
}

result<std::unique_ptr<node_host>> node_host::start_client(const node_config& cfg,
                                                           std::vector<std::string> owner_addresses,
                                                           placement where) {
  auto host = prepare(cfg, role::client, where);
  if (!host) return host;
  auto& h = **host;
  h.make_system(cfg.node.threads, where);
  client_deps deps;
  deps.identity = {h.id_, role::client, node_name(cfg, "client", ""), ""};
  deps.owner_addresses = std::move(owner_addresses);
  deps.keepalive = std::chrono::duration_cast<clock_duration>(cfg.client.keepalive);
  h.served_ = std::make_shared<rpc_served_slot>();
  deps.served = h.served_;
  auto shm = std::make_unique<transport::shm_client>(shm_tag, *h.sink_, h.limits_);
  h.shm_client_ = shm.get();
  h.net_->add(shm_tag, std::move(shm));
  deps.net = h.net_.get();
  h.actor_ = caf::actor_cast<caf::actor>(spawn_client(h.system(), std::move(deps)));
  h.sink_->bind(h.actor_);
  return host;
}

node_host::~node_host() {
  if (actor_) {
    // Let the role say goodbye (an owner tells the master it leaves)
    // before the transports go; a role that does not answer in time is
    // stopped anyway.
    caf::scoped_actor self{system()};
    self->request(actor_, stop_timeout, stop_atom::value)
        .receive([](bool) {}, [](const caf::error&) {});
    // The actor may still be finishing (its state refers to this node's
    // transports) and a shared system outlives this node: wait for it.
    caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
    self->wait_for(actor_);
  }
  // No transport event may reach the sink once it is gone: stop I/O first.
  if (net_) net_->shutdown();
  if (rdma_) rdma_->stop();
  actor_ = nullptr;
  sink_.reset();
  // The last node of a shared system takes it down.
  runtime_.reset();
  net_.reset();
  rdma_.reset();
  gpu_.reset();
}

result<gpu_report> node_host::gpu_pools() const {
  if (role_ != role::owner) return fail(errc::invalid_argument, "only an owner has GPU pools");
  result<gpu_report> out = fail(errc::unavailable, "the owner did not answer");
  caf::scoped_actor self{system()};
  self->request(actor_, ask_timeout, gpu_atom::value)
      .receive([&](const gpu_report& r) { out = r; },
               [&](const caf::error& e) { out = fail(errc::unavailable, "the owner did not answer: " + system().render(e)); });
  return out;
}

}  // namespace sluice
