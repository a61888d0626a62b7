// sluice s3: an S3-compatible endpoint whose objects are the files of
// backing directories. Settings come from [s3] of --config, then the
// flags given; running_s3_gateway wires the pieces. Serves until
// SIGINT/SIGTERM.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "api/cli/cli.hpp"
#include "api/cli/s3_gateway.hpp"
#include "runtime/config/load.hpp"
#include "runtime/units.hpp"

namespace sluice::cli {
namespace {

/// The flags, and which were given (those override [s3]).
struct s3_flags {
  std::string config;
  s3_section values;
  std::string request_timeout;
  std::string idle_timeout;
  std::string chunk_bytes;
  bool no_cache = false;
};

int usage(const std::string& message) {
  std::cerr << "sluice s3: " << message << "\n";
  return exit_usage;
}

bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

result<std::chrono::microseconds> timeout_flag(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d || d->count() <= 0) return fail(errc::invalid_argument, flag + ": not a duration above 0: '" + text + "'");
  return *d;
}

/// [s3] of the config file (when given), then each flag given on top.
result<s3_section> settings_of(const s3_flags& f, CLI::App& cmd) {
  s3_section s;
  if (!f.config.empty()) {
    auto config = load_config_file(f.config);
    if (!config) return std::move(config).error();
    s = config->s3;
  }
  const auto& v = f.values;
  if (given(cmd.get_option_no_throw("--listen"))) s.listen = v.listen;
  if (given(cmd.get_option_no_throw("--bucket"))) s.buckets = v.buckets;  // the flags replace the file's list
  if (given(cmd.get_option_no_throw("--root"))) s.root = v.root;
  if (given(cmd.get_option_no_throw("--anonymous"))) s.anonymous = v.anonymous;
  if (given(cmd.get_option_no_throw("--access-key"))) s.access_key = v.access_key;
  if (given(cmd.get_option_no_throw("--secret-key"))) s.secret_key = v.secret_key;
  if (given(cmd.get_option_no_throw("--domain"))) s.domain = v.domain;
  if (given(cmd.get_option_no_throw("--region"))) s.region = v.region;
  if (given(cmd.get_option_no_throw("--owner"))) s.owner = v.owner;
  if (given(cmd.get_option_no_throw("--no-cache"))) s.cache = !f.no_cache;
  if (given(cmd.get_option_no_throw("--chunk-size"))) {
    auto bytes = parse_size(f.chunk_bytes);
    if (!bytes) return fail(errc::invalid_argument, "--chunk-size: " + bytes.error().message());
    s.chunk_bytes = *bytes;
  }
  if (given(cmd.get_option_no_throw("--threads"))) s.threads = v.threads;
  if (given(cmd.get_option_no_throw("--connections-max"))) s.connections_max = v.connections_max;
  if (given(cmd.get_option_no_throw("--request-timeout"))) {
    auto t = timeout_flag("--request-timeout", f.request_timeout);
    if (!t) return std::move(t).error();
    s.request_timeout = *t;
  }
  if (given(cmd.get_option_no_throw("--idle-timeout"))) {
    auto t = timeout_flag("--idle-timeout", f.idle_timeout);
    if (!t) return std::move(t).error();
    s.idle_timeout = *t;
  }
  return s;
}

int run_s3(const s3_flags& f, CLI::App& cmd) {
  auto settings = settings_of(f, cmd);
  if (!settings) return usage(settings.error().message());
  auto gateway = running_s3_gateway::start(*settings, "--");
  if (!gateway) {
    if (gateway.code() == errc::invalid_argument) return usage(gateway.error().message());
    std::cerr << "sluice s3: cannot start: " << gateway.error().to_string() << "\n";
    return exit_failed;
  }
  std::cout << "sluice s3: listening on " << (*gateway)->address() << (*gateway)->access_note() << "\n"
            << (*gateway)->cache_note() << std::endl;
  wait_for_stop_signal();
  std::cout << "sluice s3: stopping" << std::endl;
  return exit_ok;
}

}  // namespace

void add_s3_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<s3_flags>();
  auto& v = f->values;
  auto* s3 = app.add_subcommand("s3", "Serve directories over S3 (objects are files; the directory stays the truth)");
  s3->add_option("--config", f->config, "TOML configuration file: its [s3] section; flags given win")
      ->check(CLI::ExistingFile);
  s3->add_option("--listen", v.listen, "HOST:PORT to serve HTTP on (default 127.0.0.1:9000; port 0 picks one)");
  s3->add_option("--bucket", v.buckets, "Export DIR as bucket NAME: NAME=DIR (repeatable)");
  s3->add_option("--root", v.root, "Subdirectories of DIR are buckets; CreateBucket makes new ones here")
      ->check(CLI::ExistingDirectory);
  s3->add_flag("--anonymous", v.anonymous, "Accept unsigned requests from anyone (instead of an access key)");
  s3->add_option("--access-key", v.access_key, "The access key id requests must be signed with (SigV4)");
  s3->add_option("--secret-key", v.secret_key,
                 "Its secret (also from the environment variable SLUICE_S3_SECRET_KEY, which ps does not show)")
      ->envname("SLUICE_S3_SECRET_KEY");
  s3->add_option("--domain", v.domain, "Also accept virtual-host addressing: BUCKET.DOMAIN");
  s3->add_option("--region", v.region, "The region reported to clients (default us-east-1)");
  s3->add_option("--owner", v.owner,
                 "Cache objects' chunks in the pool of the owner at HOST:PORT (this host's), so hot reads come "
                 "from memory");
  s3->add_option("--chunk-size", f->chunk_bytes, "Objects are cached in chunks of this size (default 4MiB)");
  s3->add_flag("--no-cache", f->no_cache, "Read every object from its file, even with an owner given");
  s3->add_option("--threads", v.threads, "I/O threads (default 4)")->check(CLI::Range(1, 64));
  s3->add_option("--connections-max", v.connections_max, "Connections served at once (default 256)")
      ->check(CLI::Range(1, 65536));
  s3->add_option("--request-timeout", f->request_timeout, "Deadline of one request, header to last byte (default 15m)");
  s3->add_option("--idle-timeout", f->idle_timeout,
                 "Idle keep-alive connections close after this; also each read or write must progress within it "
                 "(default 30s)");
  s3->callback([f, s3, &exit_code] { exit_code = run_s3(*f, *s3); });
}

}  // namespace sluice::cli
