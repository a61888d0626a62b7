// sluice kv put | get | rm | exists | ls | count: calls against an owner.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/cli/cli.hpp"
#include "runtime/units.hpp"
#include "sluice/client.hpp"

namespace sluice::cli {
namespace {

struct kv_flags {
  std::string connect = default_connect;
  std::string key;
  std::string source;  // put: FILE or "-"
  std::string output;  // get: FILE
  std::string config;  // [client] settings
  int timeout_ms = 0;  // 0: from the config, else 5 s
  bool if_absent = false;         // put
  std::uint64_t if_version = 0;   // put, rm
  std::string ttl;                // put: a duration, "" = none
  std::uint32_t replicas = 1;     // put
  std::uint32_t min_replicas = 0; // put: 0 = every copy
  std::string owner;              // put: preferred owner's name
  std::uint64_t limit = 0;        // ls: 0 = every key
  std::string start_after;        // ls
  bool json = false;              // ls
};

/// Every byte of `key`, printable, with the rest escaped as \xNN.
std::string escaped(const std::string& key) {
  std::string out;
  for (auto ch : key) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    }
  }
  return out;
}

/// The key as shown in messages: long keys are cut, bytes that are not
/// printable are escaped.
std::string shown(const std::string& key) {
  constexpr std::size_t shown_max = 64;
  if (key.size() <= shown_max) return escaped(key);
  return escaped(key.substr(0, shown_max)) + "... (" + std::to_string(key.size()) + " bytes)";
}

/// An operation that failed with a typed error: exit 1.
int report(std::string_view what, const std::string& key, const error& e) {
  std::cerr << "sluice kv " << what << " '" << shown(key) << "': " << e.to_string() << "\n";
  return exit_failed;
}

/// A problem with what the user asked for locally (a file, a config): exit 2.
int usage(std::string_view what, const error& e) {
  std::cerr << "sluice kv " << what << ": " << e.message() << "\n";
  return exit_usage;
}

result<std::unique_ptr<client>> open(const kv_flags& f) {
  auto options = cli_client_options(f.config, f.timeout_ms);
  if (!options) return std::move(options).error();
  return client::connect(f.connect, *options);
}

result<std::string> read_source(const std::string& source) {
  if (source.empty() || source == "-") {
    return std::string{std::istreambuf_iterator<char>{std::cin}, {}};
  }
  std::ifstream in{source, std::ios::binary};
  if (!in) return fail(errc::invalid_argument, "cannot read '" + source + "'");
  return std::string{std::istreambuf_iterator<char>{in}, {}};
}

int run_put(const kv_flags& f) {
  put_options options{.if_absent = f.if_absent, .if_version = f.if_version, .replicas = f.replicas, .owner = f.owner,
                      .min_replicas = f.min_replicas};
  if (!f.ttl.empty()) {
    auto ttl = parse_duration(f.ttl);
    if (!ttl || ttl->count() <= 0) {
      return usage("put", error{errc::invalid_argument, "--ttl: not a duration above 0 (such as 30s or 500ms): '" + f.ttl + "'"});
    }
    options.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(*ttl);
    if (options.ttl.count() == 0) options.ttl = std::chrono::milliseconds{1};
  }
  auto bytes = read_source(f.source);
  if (!bytes) return usage("put", bytes.error());
  auto c = open(f);
  if (!c) return report("put", f.key, c.error());
  auto done = (*c)->put_with_copies(f.key, *bytes, options);
  if (!done) return report("put", f.key, done.error());
  std::cerr << "put '" << shown(f.key) << "': " << bytes->size() << " bytes, version " << done->version;
  if (f.replicas > 1) std::cerr << ", " << done->copies << " of " << f.replicas << " copies";
  std::cerr << "\n";
  return exit_ok;
}

int run_get(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("get", f.key, c.error());
  auto v = (*c)->get(f.key);
  if (!v) return report("get", f.key, v.error());
  if (f.output.empty() || f.output == "-") {
    std::fwrite(v->data(), 1, v->size(), stdout);
    std::fflush(stdout);
    return exit_ok;
  }
  std::ofstream out{f.output, std::ios::binary};
  out.write(reinterpret_cast<const char*>(v->data()), static_cast<std::streamsize>(v->size()));
  if (!out) return usage("get", error{errc::invalid_argument, "cannot write '" + f.output + "'"});
  return exit_ok;
}

int run_rm(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("rm", f.key, c.error());
  auto existed = (*c)->remove(f.key, remove_options{.if_version = f.if_version});
  if (!existed) return report("rm", f.key, existed.error());
  if (!*existed) return report("rm", f.key, error{errc::not_found, "key has no committed version"});
  std::cerr << "removed '" << shown(f.key) << "'\n";
  return exit_ok;
}

int run_exists(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("exists", f.key, c.error());
  auto found = (*c)->exists(f.key);
  if (!found) return report("exists", f.key, found.error());
  std::cout << (*found ? "yes" : "no") << "\n";
  return *found ? exit_ok : exit_failed;
}

int run_ls(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("ls", f.key, c.error());
  list_options options{.start_after = f.start_after};
  std::uint64_t listed = 0;
  bool more = true;
  nlohmann::json keys = nlohmann::json::array();
  while (more && (f.limit == 0 || listed < f.limit)) {
    if (f.limit != 0) options.limit = static_cast<std::uint32_t>(std::min<std::uint64_t>(f.limit - listed, 10000));
    auto page = (*c)->list(f.key, options);
    if (!page) return report("ls", f.key, page.error());
    for (auto& k : page->keys) {
      if (f.json) {
        keys.push_back({{"key", escaped(k.key)}, {"version", k.version}, {"size", k.size}});
      } else {
        std::cout << escaped(k.key) << '\t' << k.version << '\t' << k.size << '\n';
      }
    }
    listed += page->keys.size();
    more = page->more;
    if (!page->keys.empty()) options.start_after = page->keys.back().key;
  }
  if (f.json) {
    nlohmann::json out = {{"keys", keys}, {"more", more}};
    if (more) out["next"] = escaped(options.start_after);
    std::cout << out.dump(2) << '\n';
  } else if (more) {
    std::cerr << "(more keys match; continue with --start-after '" << escaped(options.start_after) << "')\n";
  }
  std::cout.flush();
  return exit_ok;
}

int run_pin(const kv_flags& f) {
  std::chrono::milliseconds ttl{0};
  if (!f.ttl.empty()) {
    auto parsed = parse_duration(f.ttl);
    if (!parsed || parsed->count() <= 0) {
      return usage("pin", error{errc::invalid_argument, "--ttl: not a duration above 0 (such as 30s or 500ms): '" + f.ttl + "'"});
    }
    ttl = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(*parsed), std::chrono::milliseconds{1});
  }
  auto c = open(f);
  if (!c) return report("pin", f.key, c.error());
  auto version = (*c)->pin(f.key, pin_options{.ttl = ttl, .detached = true});
  if (!version) return report("pin", f.key, version.error());
  std::cerr << "pinned '" << shown(f.key) << "' (version " << *version << ")"
            << (ttl.count() == 0 ? std::string{" until unpinned"} : " for " + f.ttl) << "\n";
  return exit_ok;
}

int run_unpin(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("unpin", f.key, c.error());
  auto was = (*c)->unpin(f.key, pin_options{.detached = true});
  if (!was) return report("unpin", f.key, was.error());
  std::cerr << (*was ? "unpinned '" : "was not pinned: '") << shown(f.key) << "'\n";
  return *was ? exit_ok : exit_failed;
}

int run_count(const kv_flags& f) {
  auto c = open(f);
  if (!c) return report("count", f.key, c.error());
  auto n = (*c)->count(f.key);
  if (!n) return report("count", f.key, n.error());
  std::cout << *n << '\n';
  return exit_ok;
}

CLI::App* add_kv_subcommand(CLI::App& kv, const char* name, const char* help, kv_flags& f,
                            bool takes_prefix = false) {
  auto* cmd = kv.add_subcommand(name, help);
  if (takes_prefix) {
    cmd->add_option("PREFIX", f.key, "List keys starting with PREFIX (default: every key)");
  } else {
    cmd->add_option("KEY", f.key, "The key")->required();
  }
  cmd->add_option("--connect", f.connect, "The owner's HOST:PORT")->capture_default_str();
  cmd->add_option("--timeout-ms", f.timeout_ms,
                  "Deadline of the call in milliseconds (default: [client] request_timeout, 5 s)")
      ->check(CLI::Range(1, 300'000));
  cmd->add_option("--config", f.config, "TOML configuration file ([client] section)")
      ->check(CLI::ExistingFile);
  return cmd;
}

}  // namespace

void add_kv_commands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<kv_flags>();
  auto* kv = app.add_subcommand("kv", "Put, get, remove, list keys");
  kv->require_subcommand(1);

  auto* put = add_kv_subcommand(*kv, "put", "Store the bytes of FILE (or stdin) under KEY", *f);
  put->add_option("FILE", f->source, "File to read, or - for stdin (default)");
  auto* absent = put->add_flag("--if-absent", f->if_absent, "Store only if KEY has no committed version (exit 1, conflict, otherwise)");
  put->add_option("--if-version", f->if_version, "Store only if KEY's committed version is N")
      ->check(CLI::PositiveNumber)
      ->excludes(absent);
  put->add_option("--ttl", f->ttl, "Expire the value this long after it is stored (30s, 500ms, 2h)");
  put->add_option("--replicas", f->replicas, "Keep N copies on distinct owners (exit 1, unavailable, unless all are committed)")
      ->check(CLI::Range(1, 255));
  put->add_option("--min-replicas", f->min_replicas,
                  "Succeed once N of the --replicas copies are committed (default: all); says how many it got")
      ->check(CLI::Range(1, 255));
  put->add_option("--owner", f->owner, "Put the value on the owner of this name when it can take it");
  put->callback([f, &exit_code] { exit_code = run_put(*f); });

  auto* get = add_kv_subcommand(*kv, "get", "Write the value of KEY to stdout", *f);
  get->add_option("-o,--output", f->output, "Write to FILE instead of stdout");
  get->callback([f, &exit_code] { exit_code = run_get(*f); });

  auto* rm = add_kv_subcommand(*kv, "rm", "Remove KEY (exit 1 when it did not exist)", *f);
  rm->add_option("--if-version", f->if_version, "Remove only if KEY's committed version is N")
      ->check(CLI::PositiveNumber);
  rm->callback([f, &exit_code] { exit_code = run_rm(*f); });

  auto* exists = add_kv_subcommand(*kv, "exists", "Print yes/no (exit 0/1)", *f);
  exists->callback([f, &exit_code] { exit_code = run_exists(*f); });

  auto* ls = add_kv_subcommand(*kv, "ls", "List keys (KEY, VERSION, SIZE per line) in bytewise order", *f, true);
  ls->add_option("--limit", f->limit, "List at most N keys")->check(CLI::PositiveNumber);
  ls->add_option("--start-after", f->start_after, "List keys after this one (to continue a listing)");
  ls->add_flag("--json", f->json, "Print JSON instead of lines");
  ls->callback([f, &exit_code] { exit_code = run_ls(*f); });

  auto* pin = add_kv_subcommand(*kv, "pin", "Keep KEY from eviction (until unpinned, or for --ttl)", *f);
  pin->add_option("--ttl", f->ttl, "Lift the pin after this long (30s, 500ms, 2h)");
  pin->callback([f, &exit_code] { exit_code = run_pin(*f); });

  auto* unpin = add_kv_subcommand(*kv, "unpin", "Lift KEY's pin (exit 1 when it had none)", *f);
  unpin->callback([f, &exit_code] { exit_code = run_unpin(*f); });

  auto* count = add_kv_subcommand(*kv, "count", "Print how many keys start with PREFIX", *f, true);
  count->callback([f, &exit_code] { exit_code = run_count(*f); });
}

}  // namespace sluice::cli
