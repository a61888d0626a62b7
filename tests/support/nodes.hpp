// Helpers for multi-process tests: start `sluice` node processes, connect
// clients to them, wait for the cluster to reach a state.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "tests/support/process.hpp"

namespace sluice::test {

inline const std::string sluice_bin = SLUICE_BINARY;

/// A `sluice` node process whose first stdout line names its address.
struct node_proc {
  std::unique_ptr<process> proc;
  std::string address;
  std::string log;  ///< where its stderr (its log) goes
};

/// A master keeps its state in a per-user directory unless told
/// otherwise, and tests run in parallel: a test master keeps nothing
/// unless its test names a --data-dir.
inline void keep_test_master_in_memory(std::vector<std::string>& args) {
  if (args.empty() || args.front() != "master") return;
  for (auto& a : args) {
    if (a == "--data-dir" || a == "--in-memory") return;
  }
  args.emplace_back("--in-memory");
}

inline node_proc start_node(std::vector<std::string> args) {
  using namespace std::chrono_literals;
  keep_test_master_in_memory(args);
  node_proc n;
  n.log = temp_path("node.log");
  n.proc = std::make_unique<process>(sluice_bin, std::move(args), n.log);
  auto line = n.proc->read_line(10s);
  REQUIRE_MESSAGE(line.has_value(), "the node printed no address line");
  n.address = address_in(*line);
  REQUIRE_MESSAGE(!n.address.empty(), "no address in: " << *line);
  return n;
}

/// Writes `text` to a fresh TOML file and returns its path.
inline std::string write_config(const std::string& text) {
  auto path = temp_path("node.toml");
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

/// An owner of `master` on a free loopback port, with the config file
/// `config` (none when empty).
inline node_proc start_owner(const node_proc& master, const std::string& config = {}) {
  std::vector<std::string> args{"owner", "--master", master.address, "--listen", "127.0.0.1:0"};
  if (!config.empty()) args.insert(args.end(), {"--config", config});
  return start_node(std::move(args));
}

inline std::unique_ptr<client> connect(const std::string& address) {
  auto c = client::connect(address);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

/// A client of the owner at `address` over shared memory only.
inline std::unique_ptr<client> connect_shm(const std::string& address) {
  client_options options;
  options.transport = client_transport::shared_memory;
  auto c = client::connect(address, options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

/// Polls status through `c` until `pred` holds (or 10 s pass).
template <class Pred>
cluster_status await_status(client& c, Pred pred) {
  using namespace std::chrono_literals;
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (true) {
    auto s = c.status();
    if (s && pred(*s)) return *s;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up,
                    "status never reached the expected state: "
                        << (s ? std::to_string(s->members.size()) + " members" : s.error().to_string()));
    std::this_thread::sleep_for(20ms);
  }
}

inline std::size_t count_up(const cluster_status& s) {
  std::size_t n = 0;
  for (auto& m : s.members) n += m.up ? 1 : 0;
  return n;
}

/// Bytes that differ by size and seed, so a wrong value never matches.
inline std::string pattern(std::size_t size, char seed) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
  return s;
}

}  // namespace sluice::test
