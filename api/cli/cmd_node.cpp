// sluice up | master | owner: run nodes until SIGINT/SIGTERM.

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "api/cli/cli.hpp"
#include "sluice/node.hpp"

namespace sluice::cli {
namespace {

struct node_flags {
  std::string config;
  std::string listen;
  std::string master;
  std::string master_listen;
  std::string advertise;
  std::string data_dir;
};

int fail_start(std::string_view what, const error& e) {
  std::cerr << "sluice " << what << ": cannot start: " << e.to_string() << "\n";
  return e.code() == errc::invalid_argument || e.code() == errc::not_found ? exit_usage : exit_failed;
}

int run_up(const node_flags& f) {
  local_cluster_options options;
  options.config_file = f.config;
  options.listen = f.listen;
  options.master_listen = f.master_listen;
  options.default_listen = "127.0.0.1:7070";
  options.default_master_listen = "127.0.0.1:7071";
  auto cluster = local_cluster::start(options);
  if (!cluster) return fail_start("up", cluster.error());
  std::cout << "sluice up: listening on " << (*cluster)->client_address()
            << " (clients connect here)\n"
            << "master listening on " << (*cluster)->master_address()
            << " (owners of other hosts join here)\n"
            << "try: echo hello | sluice kv put greeting - && sluice kv get greeting\n"
            << "stop with Ctrl-C" << std::endl;
  wait_for_stop_signal();
  std::cout << "sluice up: stopping" << std::endl;
  return exit_ok;
}

int run_role(const node_flags& f, bool master) {
  node_options options;
  options.config_file = f.config;
  options.listen = f.listen;
  options.master = f.master;
  options.advertise = f.advertise;
  options.data_dir = f.data_dir;
  auto n = master ? node::start_master(options) : node::start_owner(options);
  const char* name = master ? "master" : "owner";
  if (!n) return fail_start(name, n.error());
  std::cout << "sluice " << name << ": listening on " << (*n)->address() << " (id " << (*n)->id();
  if ((*n)->advertised_address() != (*n)->address()) {
    std::cout << ", reachable at " << (*n)->advertised_address();
  }
  std::cout << ")" << std::endl;
  wait_for_stop_signal();
  std::cout << "sluice " << name << ": stopping" << std::endl;
  return exit_ok;
}

}  // namespace

void add_node_commands(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<node_flags>();

  auto* up = app.add_subcommand("up", "Run a master and an owner in this process (no config needed)");
  up->add_option("--config", flags->config, "TOML configuration file")->check(CLI::ExistingFile);
  up->add_option("--listen", flags->listen, "Where clients connect, HOST:PORT (default: [node] listen, else 127.0.0.1:7070)");
  up->add_option("--master-listen", flags->master_listen,
                 "Where owners of other hosts reach the master (default 127.0.0.1:7071)");
  up->callback([flags, &exit_code] { exit_code = run_up(*flags); });

  auto* master = app.add_subcommand("master", "Run a master (control plane)");
  master->add_option("--config", flags->config, "TOML configuration file")->check(CLI::ExistingFile);
  master->add_option("--listen", flags->listen, "HOST:PORT to accept links on (default 127.0.0.1:7071)");
  master->add_option("--advertise", flags->advertise,
                     "HOST:PORT other nodes reach this one at (default: the listen address)");
  master->add_option("--data-dir", flags->data_dir,
                     "Keep the directory and membership here across restarts (or [master] data_dir; "
                     "default: in memory only)");
  master->callback([flags, &exit_code] { exit_code = run_role(*flags, true); });

  auto* owner = app.add_subcommand("owner", "Run an owner (contributes memory, serves clients)");
  owner->add_option("--config", flags->config, "TOML configuration file")->check(CLI::ExistingFile);
  owner->add_option("--listen", flags->listen, "HOST:PORT to accept links on (default 127.0.0.1:7070)");
  owner->add_option("--master", flags->master, "The master's HOST:PORT (or [owner] master in the config)");
  owner->add_option("--advertise", flags->advertise,
                    "HOST:PORT other owners reach this one at (default: the listen address)");
  owner->callback([flags, &exit_code] { exit_code = run_role(*flags, false); });
}

}  // namespace sluice::cli
