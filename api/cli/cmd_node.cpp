// sluice up | master | owner: run nodes until SIGINT/SIGTERM. `sluice up`
// also runs an S3 gateway beside its owner when [s3] listen or --s3 says
// where.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "api/cli/cli.hpp"
#include "api/cli/s3_gateway.hpp"
#include "runtime/config/load.hpp"
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
  // sluice up's gateway: these win over [s3] of the config file.
  std::string s3_listen;
  std::vector<std::string> s3_buckets;
  std::string s3_root;
  bool s3_anonymous = false;
  std::string s3_access_key;
  std::string s3_secret_key;
  std::string s3_users;
  std::vector<std::string> s3_write_back;
  std::string s3_journal;
  CLI::App* up = nullptr;
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

bool given(const CLI::App& cmd, const char* flag) {
  const auto* o = cmd.get_option_no_throw(flag);
  return o != nullptr && o->count() > 0;
}

/// [s3] of the config file (when given), then the --s3* flags given.
result<s3_section> up_s3_settings(const node_flags& f) {
  s3_section s;
  if (!f.config.empty()) {
    auto config = load_config_file(f.config);
    if (!config) return std::move(config).error();
    s = config->s3;
  }
  const auto& up = *f.up;
  if (given(up, "--s3")) s.listen = f.s3_listen;
  if (given(up, "--s3-bucket")) s.buckets = f.s3_buckets;
  if (given(up, "--s3-root")) s.root = f.s3_root;
  if (given(up, "--s3-anonymous")) s.anonymous = f.s3_anonymous;
  if (given(up, "--s3-access-key")) s.access_key = f.s3_access_key;
  if (given(up, "--s3-secret-key")) s.secret_key = f.s3_secret_key;
  if (given(up, "--s3-users")) s.users = f.s3_users;
  if (given(up, "--s3-write-back")) s.write_back = f.s3_write_back;
  if (given(up, "--s3-journal")) s.journal = f.s3_journal;
  return s;
}

int fail_start(std::string_view what, const error& e) {
  std::cerr << "sluice " << what << ": cannot start: " << e.to_string() << "\n";
  return e.code() == errc::invalid_argument || e.code() == errc::not_found ? exit_usage : exit_failed;
}

int run_up(const node_flags& f) {
  auto s3 = up_s3_settings(f);
  if (!s3) return fail_start("up", s3.error());
  if (s3->listen.empty() && (!s3->buckets.empty() || !s3->root.empty())) {
    return fail_start("up", error{errc::invalid_argument, "S3 buckets are given but no --s3 HOST:PORT to serve them on"});
  }
  local_cluster_options options;
  options.config_file = f.config;
  options.listen = f.listen;
  options.master_listen = f.master_listen;
  options.data_dir = f.data_dir;
  options.default_listen = "127.0.0.1:7070";
  options.default_master_listen = "127.0.0.1:7071";
  auto cluster = local_cluster::start(options);
  if (!cluster) return fail_start("up", cluster.error());
  // The gateway is a client of this node's owner, whose pool caches its
  // chunks (unless [s3] names another owner, or cache = false).
  std::unique_ptr<running_s3_gateway> gateway;
  if (!s3->listen.empty()) {
    if (s3->owner.empty()) s3->owner = (*cluster)->client_address();
    auto started = running_s3_gateway::start(*s3, "--s3-");
    if (!started) return fail_start("up", started.error());
    gateway = std::move(*started);
  }
  std::cout << "sluice up: listening on " << (*cluster)->client_address()
            << " (clients connect here)\n"
            << "master listening on " << (*cluster)->master_address()
            << " (owners of other hosts join here)\n"
            << state_line((*cluster)->data_dir()) << "\n"
            << "try: echo hello | sluice kv put greeting - && sluice kv get greeting\n";
  if (gateway) {
    std::cout << "S3 gateway listening on " << gateway->address() << gateway->access_note() << "\n"
              << "S3 " << gateway->cache_note() << "\n";
    if (auto note = gateway->write_back_note(); !note.empty()) std::cout << "S3 " << note << "\n";
  }
  std::cout << "stop with Ctrl-C" << std::endl;
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
  up->add_option("--s3", flags->s3_listen,
                 "Also serve S3 on HOST:PORT, beside the owner (or [s3] listen; see docs/s3.md)");
  up->add_option("--s3-bucket", flags->s3_buckets, "Export DIR as S3 bucket NAME: NAME=DIR (repeatable)");
  up->add_option("--s3-root", flags->s3_root, "Subdirectories of DIR are S3 buckets; CreateBucket makes new ones here")
      ->check(CLI::ExistingDirectory);
  up->add_flag("--s3-anonymous", flags->s3_anonymous, "The gateway accepts unsigned requests from anyone");
  up->add_option("--s3-access-key", flags->s3_access_key, "The access key id S3 requests must be signed with");
  up->add_option("--s3-secret-key", flags->s3_secret_key, "Its secret (also from SLUICE_S3_SECRET_KEY)")
      ->envname("SLUICE_S3_SECRET_KEY");
  up->add_option("--s3-users", flags->s3_users, "S3 requests must be signed by a user of this file (sluice s3 user)")
      ->check(CLI::ExistingFile);
  up->add_option("--s3-write-back", flags->s3_write_back,
                 "Write S3 bucket BUCKET back (repeatable; * for every bucket): PUTs are answered once kept in the "
                 "pool, files written afterwards (needs --s3-journal)");
  up->add_option("--s3-journal", flags->s3_journal, "The S3 write-back journal, a sqlite file (made when missing)");
  flags->up = up;
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
