#include "sluice/node.hpp"

#include <thread>

#include "api/src/client_impl.hpp"
#include "actors/owner/owner.hpp"
#include "api/src/node_host.hpp"
#include "runtime/config/load.hpp"
#include "runtime/log.hpp"
#include "transports/inproc/inproc_transport.hpp"

namespace sluice {
namespace {

/// The owner's name on the in-process hub of a local cluster.
constexpr const char* local_owner_name = "owner";
constexpr const char* local_master_name = "master";
/// How long start() waits for the owner to join the master.
constexpr std::chrono::seconds ready_timeout{10};

result<node_config> load(const std::string& file, const std::string& text) {
  if (!file.empty()) return load_config_file(file);
  if (!text.empty()) return load_config_string(text);
  return node_config{};
}

result<node_config> configure(const node_options& options) {
  auto cfg = load(options.config_file, options.config_text);
  if (!cfg) return cfg;
  if (!options.listen.empty()) cfg->node.listen = options.listen;
  if (!options.master.empty()) cfg->owner.master = options.master;
  if (!options.advertise.empty()) cfg->node.advertise = options.advertise;
  if (!options.data_dir.empty()) cfg->master.data_dir = options.data_dir;
  if (cfg->master.data_dir.empty()) cfg->master.data_dir = options.default_data_dir;
  if (options.in_memory) cfg->master.data_dir.clear();
  if (auto ok = configure_logging(cfg->log.level); !ok) return ok.error();
  return cfg;
}

}  // namespace

struct node::impl {
  std::unique_ptr<node_host> host;
};

node::node(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
node::~node() = default;

const std::string& node::address() const noexcept { return impl_->host->address(); }
const std::string& node::advertised_address() const noexcept { return impl_->host->advertised(); }
std::string node::id() const { return impl_->host->id().to_string(); }
const std::string& node::data_dir() const noexcept { return impl_->host->data_dir(); }

result<std::vector<gpu_pool_info>> node::gpu_pools() const {
  auto report = impl_->host->gpu_pools();
  if (!report) return std::move(report).error();
  if (report->pools.empty()) return fail(errc::unavailable, "no GPU pools on this owner: " + report->unavailable);
  std::vector<gpu_pool_info> out;
  for (auto& p : report->pools) {
    out.push_back({.device = p.device, .name = p.name, .capacity_bytes = p.capacity_bytes, .used_bytes = p.used_bytes,
                   .ipc = p.ipc});
  }
  return out;
}

result<std::unique_ptr<node>> node::start_master(const node_options& options) {
  auto cfg = configure(options);
  if (!cfg) return std::move(cfg).error();
  auto host = node_host::start_master(*cfg);
  if (!host) return std::move(host).error();
  return std::make_unique<node>(std::make_unique<impl>(impl{std::move(*host)}));
}

result<std::unique_ptr<node>> node::start_owner(const node_options& options) {
  auto cfg = configure(options);
  if (!cfg) return std::move(cfg).error();
  auto host = node_host::start_owner(*cfg);
  if (!host) return std::move(host).error();
  return std::make_unique<node>(std::make_unique<impl>(impl{std::move(*host)}));
}

struct local_cluster::impl {
  // Declared first so it is destroyed last: both nodes refer to it, and so
  // do clients from connect(), which may outlive the cluster.
  std::shared_ptr<transport::inproc_hub> hub = std::make_shared<transport::inproc_hub>();
  std::unique_ptr<node_host> master;
  std::unique_ptr<node_host> owner;
};

local_cluster::local_cluster(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

local_cluster::~local_cluster() {
  // The owner goes first so the master never reports it as failed.
  impl_->owner.reset();
  impl_->master.reset();
}

const std::string& local_cluster::client_address() const noexcept { return impl_->owner->address(); }
const std::string& local_cluster::master_address() const noexcept { return impl_->master->address(); }
const std::string& local_cluster::data_dir() const noexcept { return impl_->master->data_dir(); }

result<std::unique_ptr<local_cluster>> local_cluster::start(const local_cluster_options& options) {
  node_options both;
  both.config_file = options.config_file;
  both.config_text = options.config_text;
  both.data_dir = options.data_dir;
  auto cfg = configure(both);
  if (!cfg) return std::move(cfg).error();
  auto state = std::make_unique<impl>();

  auto master_cfg = *cfg;
  master_cfg.node.listen =
      options.master_listen.empty() ? options.default_master_listen : options.master_listen;
  // One actor system for both: a request the owner passes to the master
  // and the answer coming back wake no other system's threads.
  auto runtime = std::make_shared<node_runtime>();
  auto master = node_host::start_master(master_cfg, {state->hub.get(), local_master_name, runtime});
  if (!master) return std::move(master).error();
  state->master = std::move(*master);

  auto owner_cfg = *cfg;
  if (!options.listen.empty()) {
    owner_cfg.node.listen = options.listen;
  } else if (owner_cfg.node.listen.empty()) {
    owner_cfg.node.listen = options.default_listen;
  }
  owner_cfg.owner.master = std::string{"inproc://"} + local_master_name;
  auto owner = node_host::start_owner(owner_cfg, {state->hub.get(), local_owner_name, runtime});
  if (!owner) return std::move(owner).error();
  state->owner = std::move(*owner);
  auto cluster = std::make_unique<local_cluster>(std::move(state));
  if (auto ready = cluster->wait_ready(); !ready) return ready.error();
  return cluster;
}

result<void> local_cluster::wait_ready() const {
  // The owner registers with the master right after it starts; calls made
  // before that would fail with `unavailable`, so start() waits for it.
  auto probe = connect({});
  if (!probe) return probe.error();
  auto give_up = std::chrono::steady_clock::now() + ready_timeout;
  error last{errc::timeout, "the owner did not register with the master in time"};
  while (std::chrono::steady_clock::now() < give_up) {
    auto status = (*probe)->status({std::chrono::milliseconds{1000}});
    if (status && !status->members.empty() && status->members.front().up) return {};
    if (!status) last = status.error();
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return last;
}

result<std::unique_ptr<client>> local_cluster::connect(client_options options) const {
  return client::impl::connect_with(std::string{"inproc://"} + local_owner_name, std::move(options),
                                    impl_->hub);
}

}  // namespace sluice
