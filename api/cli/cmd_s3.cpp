// sluice s3: an S3-compatible endpoint whose objects are the files of
// backing directories. Settings come from [s3] of --config, then the
// flags given; running_s3_gateway wires the pieces. Serves until
// SIGINT/SIGTERM.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/cli/cli.hpp"
#include "api/cli/s3_gateway.hpp"
#include "api/cli/s3_users.hpp"
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
  std::string flush_delay;
  std::string dirty_bytes_max;
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
  if (given(cmd.get_option_no_throw("--users"))) s.users = v.users;
  if (given(cmd.get_option_no_throw("--domain"))) s.domain = v.domain;
  if (given(cmd.get_option_no_throw("--region"))) s.region = v.region;
  if (given(cmd.get_option_no_throw("--owner"))) s.owner = v.owner;
  if (given(cmd.get_option_no_throw("--no-cache"))) s.cache = !f.no_cache;
  if (given(cmd.get_option_no_throw("--chunk-size"))) {
    auto bytes = parse_size(f.chunk_bytes);
    if (!bytes) return fail(errc::invalid_argument, "--chunk-size: " + bytes.error().message());
    s.chunk_bytes = *bytes;
  }
  if (given(cmd.get_option_no_throw("--write-back"))) s.write_back = v.write_back;
  if (given(cmd.get_option_no_throw("--journal"))) s.journal = v.journal;
  if (given(cmd.get_option_no_throw("--write-back-copies"))) s.write_back_copies = v.write_back_copies;
  if (given(cmd.get_option_no_throw("--flush-delay"))) {
    auto d = parse_duration(f.flush_delay);
    if (!d || d->count() < 0) return fail(errc::invalid_argument, "--flush-delay: not a duration: '" + f.flush_delay + "'");
    s.flush_delay = *d;
  }
  if (given(cmd.get_option_no_throw("--dirty-max"))) {
    auto bytes = parse_size(f.dirty_bytes_max);
    if (!bytes || *bytes == 0) return fail(errc::invalid_argument, "--dirty-max: not a size above 0: '" + f.dirty_bytes_max + "'");
    s.dirty_bytes_max = *bytes;
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

/// `sluice s3 user …`: what each subcommand was given.
struct user_flags {
  std::string users;
  std::string name;
  std::vector<std::string> grants;
  bool json = false;
};

int user_failed(const error& e) {
  std::cerr << "sluice s3 user: " << e.message() << "\n";
  return e.code() == errc::invalid_argument || e.code() == errc::not_found || e.code() == errc::conflict
             ? exit_usage
             : exit_failed;
}

result<std::vector<std::pair<std::string, s3::bucket_access>>> grants_of(const std::vector<std::string>& texts) {
  std::vector<std::pair<std::string, s3::bucket_access>> out;
  for (const auto& text : texts) {
    auto grant = parse_grant(text);
    if (!grant) return grant.error();
    out.push_back(std::move(*grant));
  }
  return out;
}

std::string grants_text(const s3::s3_user& u) {
  std::string out;
  for (const auto& [bucket, access] : u.grants) {
    if (!out.empty()) out += ' ';
    out += bucket + "=" + std::string{s3::to_string(access)};
  }
  return out.empty() ? "(no grants)" : out;
}

int run_user_add(const user_flags& f) {
  auto grants = grants_of(f.grants);
  if (!grants) return user_failed(grants.error());
  auto store = s3_user_store::open(f.users, true);
  if (!store) return user_failed(store.error());
  auto user = (*store)->add(f.name, *grants);
  if (!user) return user_failed(user.error());
  // The secret is shown this once; the file keeps it for the gateway.
  std::cout << "user " << user->name << "\naccess key: " << user->keys.access_key
            << "\nsecret key: " << user->keys.secret_key << "\ngrants: " << grants_text(*user) << std::endl;
  return exit_ok;
}

int run_user_rm(const user_flags& f) {
  auto store = s3_user_store::open(f.users, false);
  if (!store) return user_failed(store.error());
  auto removed = (*store)->remove(f.name);
  if (!removed) return user_failed(removed.error());
  if (!*removed) return user_failed(error{errc::not_found, "there is no user '" + f.name + "'"});
  std::cout << "removed user " << f.name << std::endl;
  return exit_ok;
}

int run_user_grant(const user_flags& f) {
  auto grants = grants_of(f.grants);
  if (!grants) return user_failed(grants.error());
  auto store = s3_user_store::open(f.users, false);
  if (!store) return user_failed(store.error());
  for (const auto& [bucket, access] : *grants) {
    if (auto ok = (*store)->grant(f.name, bucket, access); !ok) return user_failed(ok.error());
  }
  return exit_ok;
}

int run_user_ls(const user_flags& f) {
  auto store = s3_user_store::open(f.users, false);
  if (!store) return user_failed(store.error());
  auto users = (*store)->all();
  if (!users) return user_failed(users.error());
  if (f.json) {
    auto out = nlohmann::json::array();
    for (const auto& u : *users) {
      auto grants = nlohmann::json::object();
      for (const auto& [bucket, access] : u.grants) grants[bucket] = std::string{s3::to_string(access)};
      out.push_back({{"name", u.name}, {"access_key", u.keys.access_key}, {"grants", grants}});
    }
    std::cout << out.dump(2) << std::endl;
    return exit_ok;
  }
  for (const auto& u : *users) std::cout << u.name << "  " << u.keys.access_key << "  " << grants_text(u) << "\n";
  std::cout << std::flush;
  return exit_ok;
}

void add_user_commands(CLI::App& s3, int& exit_code) {
  auto* user = s3.add_subcommand("user", "Manage the gateway's users (a sqlite file given to sluice s3 --users)");
  user->require_subcommand(1);
  auto add_file = [](CLI::App* cmd, user_flags& f) {
    cmd->add_option("--users", f.users, "The users file (made by the first add)")->required();
  };
  auto f = std::make_shared<user_flags>();
  auto* add = user->add_subcommand("add", "Add a user with new keys; prints the secret, once");
  add->add_option("NAME", f->name, "The user's name")->required();
  add->add_option("--grant", f->grants, "BUCKET=read|write (repeatable; * for every bucket)");
  add_file(add, *f);
  add->callback([f, &exit_code] { exit_code = run_user_add(*f); });
  auto* rm = user->add_subcommand("rm", "Remove a user: its key is refused from the next request on");
  rm->add_option("NAME", f->name, "The user's name")->required();
  add_file(rm, *f);
  rm->callback([f, &exit_code] { exit_code = run_user_rm(*f); });
  auto* grant = user->add_subcommand("grant", "Set a user's access to buckets");
  grant->add_option("NAME", f->name, "The user's name")->required();
  grant->add_option("GRANT", f->grants, "BUCKET=read|write|none (* for every bucket)")->required();
  add_file(grant, *f);
  grant->callback([f, &exit_code] { exit_code = run_user_grant(*f); });
  auto* ls = user->add_subcommand("ls", "List users: name, access key, grants (never secrets)");
  ls->add_flag("--json", f->json, "Print JSON");
  add_file(ls, *f);
  ls->callback([f, &exit_code] { exit_code = run_user_ls(*f); });
}

std::string age_text(std::int64_t ns) {
  auto s = ns / 1'000'000'000;
  if (s < 120) return std::to_string(std::max<std::int64_t>(s, 0)) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  return std::to_string(s / 3600) + "h";
}

struct status_flags {
  std::string journal;
  bool json = false;
};

int run_status(const status_flags& f) {
  auto status = read_journal_status(f.journal);
  if (!status) {
    std::cerr << "sluice s3 status: " << status.error().message() << "\n";
    return status.code() == errc::not_found || status.code() == errc::invalid_argument ? exit_usage : exit_failed;
  }
  auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::uint64_t objects = 0, bytes = 0, failing = 0;
  std::int64_t oldest = 0;
  for (const auto& b : status->buckets) {
    objects += b.objects;
    bytes += b.bytes;
    failing += b.failing;
    if (oldest == 0 || (b.oldest_ns != 0 && b.oldest_ns < oldest)) oldest = b.oldest_ns;
  }
  auto lag_ns = oldest == 0 ? 0 : std::max<std::int64_t>(now - oldest, 0);
  if (f.json) {
    auto buckets = nlohmann::json::array();
    for (const auto& b : status->buckets) {
      buckets.push_back({{"bucket", b.bucket}, {"dirty_objects", b.objects}, {"dirty_bytes", b.bytes},
                         {"flush_lag_s", b.oldest_ns == 0 ? 0.0 : static_cast<double>(now - b.oldest_ns) / 1e9},
                         {"failing", b.failing}});
    }
    auto failures = nlohmann::json::array();
    for (const auto& e : status->failures) {
      failures.push_back({{"bucket", e.bucket}, {"key", e.key}, {"size", e.size}, {"attempts", e.attempts},
                          {"error", e.error}});
    }
    nlohmann::json out{{"gateway_running", status->in_use}, {"dirty_objects", objects}, {"dirty_bytes", bytes},
                       {"flush_lag_s", static_cast<double>(lag_ns) / 1e9}, {"failing", failing},
                       {"buckets", buckets}, {"failures", failures}};
    std::cout << out.dump(2) << std::endl;
    return exit_ok;
  }
  std::cout << "journal " << f.journal << (status->in_use ? " (a gateway has it open)" : " (no gateway has it open)")
            << "\ndirty: " << objects << (objects == 1 ? " object, " : " objects, ") << format_size(bytes) << "; flush lag "
            << (objects == 0 ? std::string{"0s"} : age_text(lag_ns)) << "; failing " << failing << "\n";
  for (const auto& b : status->buckets) {
    std::cout << "  " << b.bucket << "  " << b.objects << (b.objects == 1 ? " object  " : " objects  ") << format_size(b.bytes) << "  oldest "
              << age_text(now - b.oldest_ns) << " ago" << (b.failing > 0 ? "  failing " + std::to_string(b.failing) : "")
              << "\n";
  }
  for (const auto& e : status->failures) {
    std::cout << "  failing: " << e.bucket << "/" << e.key << " (" << format_size(e.size) << ", " << e.attempts
              << (e.attempts == 1 ? " attempt" : " attempts") << "): " << e.error << "\n";
  }
  std::cout << std::flush;
  return exit_ok;
}

void add_journal_status_command(CLI::App& s3, int& exit_code) {
  auto f = std::make_shared<status_flags>();
  auto* status = s3.add_subcommand("status", "What write-back has yet to write: dirty bytes, flush lag, failures");
  status->add_option("--journal", f->journal, "The gateway's write-back journal (sluice s3 --journal)")->required();
  status->add_flag("--json", f->json, "Print JSON");
  status->callback([f, &exit_code] { exit_code = run_status(*f); });
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
  if (auto note = (*gateway)->write_back_note(); !note.empty()) std::cout << note << std::endl;
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
  s3->add_option("--users", v.users,
                 "Requests must be signed by a user of this file, within the user's grants (sluice s3 user add)")
      ->check(CLI::ExistingFile);
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
  s3->add_option("--write-back", v.write_back,
                 "Write BUCKET back (repeatable; * for every bucket): a PUT is answered once its chunks are in the "
                 "owner's pool, and its file is written afterwards (needs --owner and --journal)");
  s3->add_option("--journal", v.journal, "The write-back journal, a sqlite file (made when missing)");
  s3->add_option("--write-back-copies", v.write_back_copies,
                 "Copies of each written-back chunk, on distinct owners (default 1)")
      ->check(CLI::Range(1, 255));
  s3->add_option("--flush-delay", f->flush_delay,
                 "A written-back object's file is written this long after its PUT at the earliest (default 0s)");
  s3->add_option("--dirty-max", f->dirty_bytes_max,
                 "Bytes waiting to be written at most; writes beyond are written through (default 1GiB)");
  add_user_commands(*s3, exit_code);
  add_journal_status_command(*s3, exit_code);
  s3->callback([f, s3, &exit_code] {
    if (s3->got_subcommand("user") || s3->got_subcommand("status")) return;  // it ran its own command
    exit_code = run_s3(*f, *s3);
  });
}

}  // namespace sluice::cli
