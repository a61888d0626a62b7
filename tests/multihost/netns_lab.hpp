// A few hosts on one machine for tests that need real sockets between
// hosts: one network namespace per host, each with its own private
// address on a bridge in a namespace of its own, and nftables rules inside
// them to cut paths or lose packets. Everything it made is removed when it
// goes, however the test ends; namespaces left behind by a test that was
// killed are removed by the next one.
//
// Needs root, `ip` (iproute2) with veth and bridge support, and `nft`
// (nftables). Where any of it is missing, create_or_skip() prints why and
// ends the test process with skip_exit_code, which CTest reports as a skip.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace sluice::test {

/// What CTest's SKIP_RETURN_CODE is set to for these tests.
inline constexpr int skip_exit_code = 77;

class netns_lab {
 public:
  /// `hosts` hosts (at most 8): namespaces with the addresses address(0),
  /// address(1), ... on one bridge. Skips the test when it cannot.
  static std::unique_ptr<netns_lab> create_or_skip(int hosts);
  ~netns_lab();
  netns_lab(const netns_lab&) = delete;
  netns_lab& operator=(const netns_lab&) = delete;

  /// "10.77.0.1" for host 0, and so on.
  std::string address(int host) const;
  const std::string& ns(int host) const { return hosts_.at(static_cast<std::size_t>(host)); }

  /// Starts `program args...` inside the host's namespace (stderr to
  /// `stderr_path`). The process is the program itself: signals reach it.
  std::unique_ptr<process> spawn(int host, const std::string& program, std::vector<std::string> args,
                                 const std::string& stderr_path = {}) const;
  /// Runs `program args...` inside the host's namespace to completion.
  run_result exec(int host, const std::string& program, std::vector<std::string> args,
                  std::chrono::milliseconds timeout = std::chrono::seconds{30}) const;

  /// Drops every packet between hosts `a` and `b`, both ways (nftables in
  /// both namespaces); heal() lifts it.
  void cut(int a, int b);
  void heal(int a, int b);
  /// Drops one in `one_in` packets, at random, arriving on every host;
  /// lose(0) stops it.
  void lose(unsigned one_in);

 private:
  explicit netns_lab(std::string prefix) : prefix_(std::move(prefix)) {}
  /// Runs a setup command; fails the test with its output when it fails.
  void must(const std::vector<std::string>& command) const;
  void nft(int host, const std::string& rules) const;
  /// Writes the host's rules from cuts_ and loss_one_in_.
  void apply(int host) const;

  std::string prefix_;
  std::string switch_ns_;
  std::vector<std::string> hosts_;
  std::vector<std::set<int>> cuts_;  // per host: the hosts it cannot reach
  unsigned loss_one_in_ = 0;
};

}  // namespace sluice::test
