#include "tests/multihost/netns_lab.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace sluice::test {
namespace {

/// Names of every namespace these tests make start with it, then the
/// creating process's id (so a later test can tell leftovers).
const std::string name_stem = "sluicetest-";
constexpr int hosts_max = 8;
/// Where the rules of one host live (one table, rebuilt on each change).
constexpr const char* table = "sluice_test";

std::string find_tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    auto path = std::string{dir} + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

const std::string& ip_tool() {
  static const std::string path = find_tool("ip");
  return path;
}

[[noreturn]] void skip(const std::string& why) {
  std::cout << "SKIP: multi-host test: " << why << std::endl;
  std::exit(skip_exit_code);
}

run_result ip(std::vector<std::string> args) { return run(ip_tool(), std::move(args), std::chrono::seconds{20}); }

/// Deletes namespaces of earlier test processes that are gone.
void remove_leftovers() {
  auto listed = ip({"netns", "list"});
  std::istringstream lines{listed.out};
  std::string line;
  while (std::getline(lines, line)) {
    auto name = line.substr(0, line.find(' '));
    if (name.rfind(name_stem, 0) != 0) continue;
    auto pid = std::atoi(name.c_str() + name_stem.size());
    if (pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // still running
    ip({"netns", "del", name});
  }
}

}  // namespace

std::unique_ptr<netns_lab> netns_lab::create_or_skip(int hosts) {
  REQUIRE(hosts >= 1);
  REQUIRE(hosts <= hosts_max);
  if (::geteuid() != 0) skip("network namespaces need root (run the tests as root)");
  if (ip_tool().empty()) skip("the ip tool (iproute2) is not installed");
  if (find_tool("nft").empty()) skip("nft (nftables) is not installed; scripts/bootstrap.sh installs it");
  remove_leftovers();
  static int labs = 0;
  std::unique_ptr<netns_lab> lab{new netns_lab{name_stem + std::to_string(::getpid()) + "-" + std::to_string(labs++)}};
  lab->switch_ns_ = lab->prefix_ + "-sw";
  auto made = ip({"netns", "add", lab->switch_ns_});
  if (made.exit_code != 0) skip("cannot create a network namespace here: " + made.err);
  auto bridge = ip({"-n", lab->switch_ns_, "link", "add", "br0", "type", "bridge"});
  if (bridge.exit_code != 0) {
    ip({"netns", "del", lab->switch_ns_});
    skip("cannot create a bridge in a network namespace: " + bridge.err);
  }
  lab->must({"-n", lab->switch_ns_, "link", "set", "br0", "up"});
  for (int h = 0; h < hosts; ++h) {
    auto ns = lab->prefix_ + "-h" + std::to_string(h);
    auto port = "h" + std::to_string(h);
    lab->must({"netns", "add", ns});
    lab->hosts_.push_back(ns);
    lab->cuts_.emplace_back();
    lab->must({"-n", lab->switch_ns_, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns});
    lab->must({"-n", lab->switch_ns_, "link", "set", port, "master", "br0", "up"});
    lab->must({"-n", ns, "addr", "add", lab->address(h) + "/24", "dev", "eth0"});
    lab->must({"-n", ns, "link", "set", "eth0", "up"});
    lab->must({"-n", ns, "link", "set", "lo", "up"});
    lab->apply(h);
  }
  return lab;
}

netns_lab::~netns_lab() {
  // Deleting a namespace deletes its end of the veth pair, and with it
  // the other end, and its nftables rules.
  for (auto& ns : hosts_) ip({"netns", "del", ns});
  if (!switch_ns_.empty()) ip({"netns", "del", switch_ns_});
}

std::string netns_lab::address(int host) const { return "10.77.0." + std::to_string(host + 1); }

void netns_lab::must(const std::vector<std::string>& command) const {
  auto r = ip(command);
  REQUIRE_MESSAGE(r.exit_code == 0, "ip " << command.front() << " ... failed: " << r.err);
}

std::unique_ptr<process> netns_lab::spawn(int host, const std::string& program, std::vector<std::string> args,
                                          const std::string& stderr_path) const {
  std::vector<std::string> all{"netns", "exec", ns(host), program};
  all.insert(all.end(), args.begin(), args.end());
  return std::make_unique<process>(ip_tool(), std::move(all), stderr_path);
}

run_result netns_lab::exec(int host, const std::string& program, std::vector<std::string> args,
                           std::chrono::milliseconds timeout) const {
  std::vector<std::string> all{"netns", "exec", ns(host), program};
  all.insert(all.end(), args.begin(), args.end());
  return run(ip_tool(), std::move(all), timeout);
}

/// Replaces the host's table with `rules` ("chain input { ... }" lines).
void netns_lab::nft(int host, const std::string& rules) const {
  auto path = temp_path("rules.nft");
  {
    std::ofstream file{path};
    // Declaring the table first makes the delete succeed on a first run.
    file << "table inet " << table << " {}\ndelete table inet " << table << "\n"
         << "table inet " << table << " {\n" << rules << "}\n";
  }
  auto r = exec(host, find_tool("nft"), {"-f", path});
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(r.exit_code == 0, "nft -f failed on host " << host << ": " << r.err);
}

void netns_lab::apply(int host) const {
  std::string input = "  chain input {\n    type filter hook input priority 0; policy accept;\n";
  std::string output = "  chain output {\n    type filter hook output priority 0; policy accept;\n";
  for (int other : cuts_.at(static_cast<std::size_t>(host))) {
    input += "    ip saddr " + address(other) + " drop\n";
    output += "    ip daddr " + address(other) + " drop\n";
  }
  // Only what crosses the wire: the host's own traffic over lo stays whole.
  if (loss_one_in_ > 1) input += "    iifname \"eth0\" numgen random mod " + std::to_string(loss_one_in_) + " 0 drop\n";
  nft(host, input + "  }\n" + output + "  }\n");
}

void netns_lab::cut(int a, int b) {
  cuts_.at(static_cast<std::size_t>(a)).insert(b);
  cuts_.at(static_cast<std::size_t>(b)).insert(a);
  apply(a);
  apply(b);
}

void netns_lab::heal(int a, int b) {
  cuts_.at(static_cast<std::size_t>(a)).erase(b);
  cuts_.at(static_cast<std::size_t>(b)).erase(a);
  apply(a);
  apply(b);
}

void netns_lab::lose(unsigned one_in) {
  loss_one_in_ = one_in;
  for (int h = 0; h < static_cast<int>(hosts_.size()); ++h) apply(h);
}

}  // namespace sluice::test
