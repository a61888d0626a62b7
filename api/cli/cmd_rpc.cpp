// sluice rpc ls | call: the registry of named handlers, and calls by hand.

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/cli/cli.hpp"
#include "sluice/rpc.hpp"

namespace sluice::cli {
namespace {

struct rpc_flags {
  std::string connect = default_connect;
  std::string config;
  int timeout_ms = 0;
  std::string name;                // ls: a prefix; call: the name
  bool json = false;               // ls
  std::vector<std::string> args;   // call: NAME[:TYPE]=VALUE
  std::string target;              // call: a client id
  bool least_outstanding = false;  // call
  bool stream = false;             // call: read NAME as a stream
  std::uint32_t window = 0;        // call --stream: the credit window; 0: the default
};

/// Bytes shown of a bytes field or tensor before the output says "...".
constexpr std::size_t shown_bytes_max = 64;

int failed(std::string_view what, const error& e) {
  std::cerr << "sluice rpc " << what << ": " << e.to_string() << "\n";
  return exit_failed;
}

int usage(std::string_view what, const std::string& message) {
  std::cerr << "sluice rpc " << what << ": " << message << "\n";
  return exit_usage;
}

result<std::unique_ptr<client>> open(const rpc_flags& f) {
  auto options = cli_client_options(f.config, f.timeout_ms);
  if (!options) return std::move(options).error();
  return client::connect(f.connect, *options);
}

template <class T>
result<T> number(std::string_view text, std::string_view name) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return fail(errc::invalid_argument, "--arg " + std::string{name} + ": '" + std::string{text} + "' is not a number");
  }
  return value;
}

/// Adds one --arg to `d`: NAME=TEXT (a string), NAME:int=N, NAME:float=X,
/// NAME:bool=true|false, NAME:file=PATH (the file's bytes). `files` keeps
/// file contents alive until the dict is encoded (bytes are borrowed).
result<void> add_arg(dict_builder& d, const std::string& arg, std::vector<std::string>& files) {
  auto eq = arg.find('=');
  if (eq == std::string::npos) return fail(errc::invalid_argument, "--arg '" + arg + "' has no '=' (NAME=VALUE)");
  auto key = std::string_view{arg}.substr(0, eq);
  auto text = std::string_view{arg}.substr(eq + 1);
  auto colon = key.find(':');
  auto name = key.substr(0, colon);
  auto type = colon == std::string_view::npos ? std::string_view{"string"} : key.substr(colon + 1);
  if (type == "string") return d.add_string(name, text);
  if (type == "int") {
    auto n = number<std::int64_t>(text, name);
    return n ? d.add_int64(name, *n) : result<void>{n.error()};
  }
  if (type == "float") {
    auto x = number<double>(text, name);
    return x ? d.add_float64(name, *x) : result<void>{x.error()};
  }
  if (type == "bool") {
    if (text != "true" && text != "false") return fail(errc::invalid_argument, "--arg " + std::string{name} + ": true or false");
    return d.add_bool(name, text == "true");
  }
  if (type == "file") {
    std::ifstream in{std::string{text}, std::ios::binary};
    if (!in) return fail(errc::invalid_argument, "--arg " + std::string{name} + ": cannot read '" + std::string{text} + "'");
    files.emplace_back(std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{});
    return d.add_bytes(name, std::as_bytes(std::span{files.back()}));
  }
  return fail(errc::invalid_argument, "--arg " + std::string{name} + ": unknown type '" + std::string{type} +
                                          "' (string, int, float, bool, file)");
}

std::string hex_of(std::span<const std::byte> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < std::min(bytes.size(), shown_bytes_max); ++i) {
    auto b = std::to_integer<unsigned>(bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  if (bytes.size() > shown_bytes_max) out += "...";
  return out;
}

/// A result as JSON: scalars and strings as themselves, bytes and tensors
/// as their size and leading bytes in hex.
nlohmann::json to_json(const dict_view& d) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& f : d) {
    auto name = std::string{f.name()};
    switch (f.kind()) {
      case field_kind::int64: out[name] = f.as_int64().value(); break;
      case field_kind::float64: out[name] = f.as_float64().value(); break;
      case field_kind::boolean: out[name] = f.as_bool().value(); break;
      case field_kind::string: out[name] = std::string{f.as_string().value()}; break;
      case field_kind::bytes: {
        auto b = f.as_bytes().value();
        out[name] = {{"bytes", b.size()}, {"hex", hex_of(b)}};
        break;
      }
      case field_kind::tensor: {
        auto t = f.as_tensor().value();
        out[name] = {{"dtype", to_string(t.dtype)},
                     {"shape", std::vector<std::int64_t>(t.shape.begin(), t.shape.end())},
                     {"bytes", t.data.size()}};
        break;
      }
    }
  }
  return out;
}

int run_ls(const rpc_flags& f) {
  auto c = open(f);
  if (!c) return failed("ls", c.error());
  auto found = (*c)->rpc().instances(f.name, true);
  if (!found) return failed("ls", found.error());
  if (f.json) {
    nlohmann::json list = nlohmann::json::array();
    for (auto& i : *found) {
      list.push_back({{"name", i.name},
                      {"client", i.client_id},
                      {"client_name", i.client_name},
                      {"owner", i.owner_id},
                      {"owner_address", i.owner_address},
                      {"max_concurrent", i.max_concurrent},
                      {"stream", i.stream}});
    }
    std::cout << nlohmann::json{{"instances", list}}.dump(2) << "\n";
    return exit_ok;
  }
  std::printf("%-32s %-16s %-20s %-22s %-14s %s\n", "NAME", "CLIENT", "CLIENT NAME", "OWNER", "MAX CONCURRENT",
              "KIND");
  for (auto& i : *found) {
    std::printf("%-32s %-16s %-20s %-22s %-14u %s\n", i.name.c_str(), i.client_id.c_str(), i.client_name.c_str(),
                i.owner_address.c_str(), i.max_concurrent, i.stream ? "stream" : "call");
  }
  return exit_ok;
}

/// Reads the stream's items as they come: one JSON object per line.
int run_stream(client& c, const rpc_target& target, const rpc_flags& f, const dict_builder& args) {
  rpc_stream_options options;
  options.routing = f.least_outstanding ? rpc_routing::least_outstanding : rpc_routing::round_robin;
  if (f.window != 0) options.window = f.window;
  auto stream = c.rpc().call_stream(target, f.name, args, options);
  while (true) {
    auto item = stream.next();
    if (!item) return failed("stream '" + f.name + "'", item.error());
    if (!*item) return exit_ok;
    std::cout << to_json((*item)->dict()).dump() << std::endl;
  }
}

int run_call(const rpc_flags& f) {
  dict_builder args;
  std::vector<std::string> files;
  files.reserve(f.args.size());  // add_arg borrows from them: no reallocation
  for (auto& a : f.args) {
    if (auto ok = add_arg(args, a, files); !ok) return usage("call", ok.error().message());
  }
  auto c = open(f);
  if (!c) return failed("call", c.error());
  rpc_call_options options;
  options.routing = f.least_outstanding ? rpc_routing::least_outstanding : rpc_routing::round_robin;
  auto target = f.target.empty() ? rpc_target::any() : rpc_target::of(f.target);
  if (!f.stream) {
    auto r = (*c)->rpc().call(target, f.name, args, options);
    // A name served as a stream says so: read it as one.
    bool a_stream = !r && r.code() == errc::invalid_argument &&
                    r.error().message().find("serves a stream") != std::string::npos;
    if (!a_stream) {
      if (!r) return failed("call '" + f.name + "'", r.error());
      std::cout << to_json(r->dict()).dump(2) << "\n";
      return exit_ok;
    }
  }
  return run_stream(**c, target, f, args);
}

void common_options(CLI::App& cmd, rpc_flags& f) {
  cmd.add_option("--connect", f.connect, "The owner's HOST:PORT")->capture_default_str();
  cmd.add_option("--timeout-ms", f.timeout_ms,
                 "Deadline of the call in milliseconds (default: [client] request_timeout, 5 s)")
      ->check(CLI::Range(1, 300'000));
  cmd.add_option("--config", f.config, "TOML configuration file ([client] section)")->check(CLI::ExistingFile);
}

}  // namespace

void add_rpc_commands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<rpc_flags>();
  auto* rpc = app.add_subcommand("rpc", "List named handlers, call one");
  rpc->require_subcommand(1);

  auto* ls = rpc->add_subcommand("ls", "List served names and their instances (NAME CLIENT CLIENT-NAME OWNER MAX)");
  ls->add_option("PREFIX", f->name, "List names starting with PREFIX (default: every name)");
  ls->add_flag("--json", f->json, "Print JSON instead of a table");
  common_options(*ls, *f);
  ls->callback([f, &exit_code] { exit_code = run_ls(*f); });

  auto* call = rpc->add_subcommand("call", "Call NAME with --arg fields; print the result as JSON");
  call->add_option("NAME", f->name, "The served name")->required();
  call->add_option("--arg", f->args,
                   "An argument field: NAME=TEXT, NAME:int=N, NAME:float=X, NAME:bool=true|false, NAME:file=PATH "
                   "(repeat for more)");
  call->add_option("--target", f->target, "Call this client's instance (its id, from `sluice rpc ls`)");
  call->add_flag("--least-outstanding", f->least_outstanding,
                 "Pick the instance with the fewest calls in flight (default: round robin)");
  call->add_flag("--stream", f->stream,
                 "NAME serves a stream: print each item as it comes, one JSON object a line (found out without "
                 "it too)");
  call->add_option("--window", f->window, "With a stream: items the handler may send ahead (default 16)")
      ->check(CLI::Range(1, 1024));
  common_options(*call, *f);
  call->callback([f, &exit_code] { exit_code = run_call(*f); });
}

}  // namespace sluice::cli
