// sluice s3: an S3-compatible endpoint whose objects are the files of
// backing directories. Wires the store, the read path, the protocol core
// and the HTTP server together, then serves until SIGINT/SIGTERM.

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "actors/s3/gateway.hpp"
#include "actors/s3/names.hpp"
#include "api/cli/cli.hpp"
#include "api/src/s3_server.hpp"
#include "runtime/rng.hpp"
#include "runtime/storage/posix_bucket_store.hpp"
#include "runtime/units.hpp"

namespace sluice::cli {
namespace {

struct s3_flags {
  std::string listen = "127.0.0.1:9000";
  std::vector<std::string> buckets;  // NAME=DIR
  std::string root;
  bool anonymous = false;
  std::string access_key;
  std::string secret_key;
  std::string domain;
  std::string region = "us-east-1";
  std::size_t threads = 4;
  std::size_t connections_max = 256;
  std::string request_timeout = "15m";
  std::string idle_timeout = "30s";
};

int usage(const std::string& message) {
  std::cerr << "sluice s3: " << message << "\n";
  return exit_usage;
}

result<posix_bucket_options> store_options(const s3_flags& f) {
  posix_bucket_options out{.root = f.root};
  for (const auto& spec : f.buckets) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return fail(errc::invalid_argument, "--bucket wants NAME=DIR, got '" + spec + "'");
    }
    auto name = spec.substr(0, eq);
    if (!s3::valid_bucket_name(name)) {
      return fail(errc::invalid_argument, "'" + name + "' is not an S3 bucket name (3-63 of a-z 0-9 . -)");
    }
    for (const auto& [other, dir] : out.exported) {
      if (other == name) return fail(errc::invalid_argument, "bucket '" + name + "' is given twice");
    }
    out.exported.emplace_back(name, spec.substr(eq + 1));
  }
  if (out.exported.empty() && out.root.empty()) {
    return fail(errc::invalid_argument, "nothing to serve: give --bucket NAME=DIR or --root DIR");
  }
  return out;
}

result<std::chrono::milliseconds> timeout_flag(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d || d->count() <= 0) return fail(errc::invalid_argument, flag + ": not a duration above 0: '" + text + "'");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Exactly one of: --anonymous, or an access key with its secret.
result<std::optional<s3::credentials>> access_of(const s3_flags& f) {
  bool keyed = !f.access_key.empty() || !f.secret_key.empty();
  if (f.anonymous && keyed) return fail(errc::invalid_argument, "--anonymous and --access-key/--secret-key exclude each other");
  if (f.anonymous) return std::optional<s3::credentials>{};
  if (!keyed) {
    return fail(errc::invalid_argument,
                "say who may use the gateway: --access-key KEY --secret-key SECRET (requests signed with SigV4), "
                "or --anonymous (anyone may read and write)");
  }
  if (f.access_key.empty() || f.secret_key.empty()) {
    return fail(errc::invalid_argument, "--access-key and --secret-key go together");
  }
  return std::optional<s3::credentials>{s3::credentials{.access_key = f.access_key, .secret_key = f.secret_key}};
}

int run_s3(const s3_flags& f) {
  auto access = access_of(f);
  if (!access) return usage(access.error().message());
  auto options = store_options(f);
  if (!options) return usage(options.error().message());
  auto request_timeout = timeout_flag("--request-timeout", f.request_timeout);
  auto idle_timeout = timeout_flag("--idle-timeout", f.idle_timeout);
  if (!request_timeout) return usage(request_timeout.error().message());
  if (!idle_timeout) return usage(idle_timeout.error().message());
  auto store = posix_bucket_store::open(*options);
  if (!store) return usage("cannot open the backing directories: " + store.error().message());
  s3::store_read_path reads{**store};
  s3::gateway gateway{**store, reads,
                      s3::gateway_options{.domain = f.domain,
                                          .region = f.region,
                                          .auth = *access,
                                          .seed = entropy_seed(),
                                          .now_ns = wall_clock_ns}};
  auto server = s3_server::start(gateway, s3_server_options{.listen = f.listen,
                                                            .threads = f.threads,
                                                            .connections_max = f.connections_max,
                                                            .request_timeout = *request_timeout,
                                                            .idle_timeout = *idle_timeout});
  if (!server) {
    std::cerr << "sluice s3: cannot start: " << server.error().to_string() << "\n";
    return server.code() == errc::invalid_argument ? exit_usage : exit_failed;
  }
  std::cout << "sluice s3: listening on " << (*server)->address()
            << (*access ? " (requests must be signed with SigV4, access key " + f.access_key + ")"
                        : std::string{" (anonymous access: anyone may read and write)"})
            << std::endl;
  wait_for_stop_signal();
  std::cout << "sluice s3: stopping" << std::endl;
  return exit_ok;
}

}  // namespace

void add_s3_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<s3_flags>();
  auto* s3 = app.add_subcommand("s3", "Serve directories over S3 (objects are files; the directory stays the truth)");
  s3->add_option("--listen", f->listen, "HOST:PORT to serve HTTP on (default 127.0.0.1:9000; port 0 picks one)");
  s3->add_option("--bucket", f->buckets, "Export DIR as bucket NAME: NAME=DIR (repeatable)");
  s3->add_option("--root", f->root, "Subdirectories of DIR are buckets; CreateBucket makes new ones here")
      ->check(CLI::ExistingDirectory);
  s3->add_flag("--anonymous", f->anonymous, "Accept unsigned requests from anyone (instead of an access key)");
  s3->add_option("--access-key", f->access_key, "The access key id requests must be signed with (SigV4)");
  s3->add_option("--secret-key", f->secret_key,
                 "Its secret (also from the environment variable SLUICE_S3_SECRET_KEY, which ps does not show)")
      ->envname("SLUICE_S3_SECRET_KEY");
  s3->add_option("--domain", f->domain, "Also accept virtual-host addressing: BUCKET.DOMAIN");
  s3->add_option("--region", f->region, "The region reported to clients (default us-east-1)");
  s3->add_option("--threads", f->threads, "I/O threads (default 4)")->check(CLI::Range(1, 64));
  s3->add_option("--connections-max", f->connections_max, "Connections served at once (default 256)")
      ->check(CLI::Range(1, 65536));
  s3->add_option("--request-timeout", f->request_timeout, "Deadline of one request, header to last byte (default 15m)");
  s3->add_option("--idle-timeout", f->idle_timeout,
                 "Idle keep-alive connections close after this; also each read or write must progress within it "
                 "(default 30s)");
  s3->callback([f, &exit_code] { exit_code = run_s3(*f); });
}

}  // namespace sluice::cli
