// sluice up | master | owner: run nodes until SIGINT/SIGTERM.

#include <cstdio>
#include <cstdlib>
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
  bool in_memory = false;
};

/// Where `sluice master` keeps its state when neither --data-dir nor
/// [master] data_dir says: $SLUICE_DATA_DIR, else
/// $XDG_STATE_HOME/sluice/master, else $HOME/.local/state/sluice/master
/// (the XDG base directory rule for state). Empty when none of them is
/// set.
std::string default_master_data_dir() {
  auto set = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string{} : std::string{v};
  };
  if (auto dir = set("SLUICE_DATA_DIR"); !dir.empty()) return dir;
  // XDG: a relative path in the variable is invalid and is ignored.
  if (auto xdg = set("XDG_STATE_HOME"); !xdg.empty() && xdg.front() == '/') return xdg + "/sluice/master";
  if (auto home = set("HOME"); !home.empty()) return home + "/.local/state/sluice/master";
  return {};
}

/// The line that says where a master keeps its state.
std::string state_line(const std::string& data_dir) {
  if (data_dir.empty()) return "state: in memory (none kept; --data-dir DIR keeps it)";
  return "state: " + data_dir + " (kept across restarts)";
}

int fail_start(std::string_view what, const error& e) {
  std::cerr << "sluice " << what << ": cannot start: " << e.to_string() << "\n";
  return e.code() == errc::invalid_argument || e.code() == errc::not_found ? exit_usage : exit_failed;
}

int run_up(const node_flags& f) {
  local_cluster_options options;
  options.config_file = f.config;
  options.listen = f.listen;
  options.master_listen = f.master_listen;
  options.data_dir = f.data_dir;
  options.default_listen = "127.0.0.1:7070";
  options.default_master_listen = "127.0.0.1:7071";
  auto cluster = local_cluster::start(options);
  if (!cluster) return fail_start("up", cluster.error());
  std::cout << "sluice up: listening on " << (*cluster)->client_address()
            << " (clients connect here)\n"
            << "master listening on " << (*cluster)->master_address()
            << " (owners of other hosts join here)\n"
            << state_line((*cluster)->data_dir()) << "\n"
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
  options.in_memory = f.in_memory;
  // With none of its variables set there is no default: the master keeps
  // its state in memory, and its state line says so.
  if (master && !f.in_memory) options.default_data_dir = default_master_data_dir();
  auto n = master ? node::start_master(options) : node::start_owner(options);
  const char* name = master ? "master" : "owner";
  if (!n) return fail_start(name, n.error());
  std::cout << "sluice " << name << ": listening on " << (*n)->address() << " (id " << (*n)->id();
  if ((*n)->advertised_address() != (*n)->address()) {
    std::cout << ", reachable at " << (*n)->advertised_address();
  }
  std::cout << ")" << std::endl;
  if (master) std::cout << "sluice master: " << state_line((*n)->data_dir()) << std::endl;
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
  up->add_option("--data-dir", flags->data_dir,
                 "Keep the master's state here across restarts (or [master] data_dir; "
                 "default: in memory only, nothing kept)");
  up->callback([flags, &exit_code] { exit_code = run_up(*flags); });

  auto* master = app.add_subcommand("master", "Run a master (control plane)");
  master->add_option("--config", flags->config, "TOML configuration file")->check(CLI::ExistingFile);
  master->add_option("--listen", flags->listen, "HOST:PORT to accept links on (default 127.0.0.1:7071)");
  master->add_option("--advertise", flags->advertise,
                     "HOST:PORT other nodes reach this one at (default: the listen address)");
  auto* data_dir = master->add_option(
      "--data-dir", flags->data_dir,
      "Keep the directory and membership here across restarts (or [master] data_dir; default: "
      "$SLUICE_DATA_DIR, else $XDG_STATE_HOME/sluice/master, else $HOME/.local/state/sluice/master)");
  master->add_flag("--in-memory", flags->in_memory, "Keep no state on disk: a restart forgets every key")
      ->excludes(data_dir);
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
