// Three hosts on one machine (network namespaces on a bridge), one owner
// each and the master on one of them, driven through the `sluice`
// launcher inside each host as a user would: values move between hosts,
// keep moving through the third host when the path between two is cut —
// control traffic to the master too — and arrive whole or fail typed, on
// time, when packets are lost.

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/multihost/netns_lab.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::test::netns_lab;
using sluice::test::process;
using sluice::test::run_result;
using sluice::test::temp_path;

const std::string sluice_bin = SLUICE_BINARY;
constexpr int host_a = 0;
constexpr int host_b = 1;  // the master's host unless a test says otherwise, the relay
constexpr int host_c = 2;

// Owners that keep no copies (so a get after the cut must cross hosts
// again), move values in 1 MiB pieces and retry a demoted path soon.
constexpr const char* owner_config = R"(
[owner]
transfer_chunk = "1MiB"
cache_remote = false
[links]
timeout = "1s"
retry = "500ms"
retry_max = "2s"
)";

std::string write_file(const std::string& stem, const std::string& bytes) {
  auto path = temp_path(stem);
  std::ofstream{path, std::ios::binary} << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string pattern(std::size_t size, unsigned seed) {
  std::string s(size, '\0');
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& c : s) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

class three_hosts {
 public:
  explicit three_hosts(int master_host = host_b) : lab_(netns_lab::create_or_skip(3)), master_host_(master_host) {
    config_ = write_file("owner.toml", owner_config);
    master_ = start(master_host_, {"master", "--listen", master_address(), "--in-memory"});
    for (int h = 0; h < 3; ++h) {
      owners_.push_back(start(h, {"owner", "--master", master_address(), "--listen", owner_address(h), "--config",
                                  config_}));
    }
    await([](const nlohmann::json& s) {
      int up = 0;
      for (auto& m : s["members"]) up += m["state"] == "up" ? 1 : 0;
      return up == 3;
    });
  }
  ~three_hosts() {
    // The processes go before the namespaces they run in.
    owners_.clear();
    master_.reset();
  }

  netns_lab& lab() { return *lab_; }
  std::string master_address() const { return lab_->address(master_host_) + ":7071"; }
  std::string owner_address(int h) const { return lab_->address(h) + ":7070"; }

  /// `sluice kv ARGS --connect <host's owner>` inside the host.
  run_result kv(int host, std::vector<std::string> args) {
    args.insert(args.begin(), "kv");
    args.push_back("--connect");
    args.push_back(owner_address(host));
    return lab_->exec(host, sluice_bin, std::move(args));
  }

  nlohmann::json status() {
    auto r = lab_->exec(master_host_, sluice_bin, {"status", "--json", "--connect", master_address()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return nlohmann::json::parse(r.out);
  }

  /// Polls the status until `pred` holds, for at most 15 s.
  template <class Pred>
  nlohmann::json await(Pred pred) {
    auto give_up = std::chrono::steady_clock::now() + 15s;
    while (true) {
      auto s = status();
      if (pred(s)) return s;
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "status never got there: " << s.dump());
      std::this_thread::sleep_for(100ms);
    }
  }

  /// Host `from`'s owner's view of its link to host `to`'s owner.
  static nlohmann::json link(const nlohmann::json& s, const std::string& from, const std::string& to) {
    std::string to_id;
    for (auto& m : s["members"]) {
      if (m["address"] == to) to_id = m["id"];
    }
    for (auto& m : s["members"]) {
      if (m["address"] != from) continue;
      for (auto& l : m["links"]) {
        if (l["peer"] == to_id) return l;
      }
    }
    return {};
  }

  /// The member entry of the owner listening at `address`.
  static nlohmann::json member(const nlohmann::json& s, const std::string& address) {
    for (auto& m : s["members"]) {
      if (m["address"] == address) return m;
    }
    return {};
  }

 private:
  std::unique_ptr<process> start(int host, std::vector<std::string> args) {
    auto p = lab_->spawn(host, sluice_bin, std::move(args), temp_path("node.log"));
    auto line = p->read_line(10s);
    REQUIRE_MESSAGE(line.has_value(), "a node in host " << host << " printed no address line");
    return p;
  }

  std::unique_ptr<netns_lab> lab_;  // first in, last out
  int master_host_;
  std::string config_;
  std::unique_ptr<process> master_;
  std::vector<std::unique_ptr<process>> owners_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("multihost: a value put on host C is read on host A, directly and, with the A-C path cut, through host B") {
  three_hosts hosts;
  auto value = pattern(3 << 20, 1);
  auto in = write_file("value", value);
  auto put = hosts.kv(host_c, {"put", "big", in});
  REQUIRE_MESSAGE(put.exit_code == 0, put.err);

  auto out = temp_path("got");
  auto direct = hosts.kv(host_a, {"get", "big", "-o", out});
  REQUIRE_MESSAGE(direct.exit_code == 0, direct.err);
  CHECK(read_file(out) == value);
  auto a = hosts.owner_address(host_a);
  auto c = hosts.owner_address(host_c);
  auto before = hosts.await([&](const nlohmann::json& s) { return three_hosts::link(s, a, c)["active"] == "tcp"; });

  hosts.lab().cut(host_a, host_c);
  // The direct link is now a black hole: the get times out on it once,
  // then goes through B, well within its deadline.
  auto t0 = std::chrono::steady_clock::now();
  auto relayed = hosts.kv(host_a, {"get", "big", "-o", out, "--timeout-ms", "5000"});
  auto took = seconds_since(t0);
  REQUIRE_MESSAGE(relayed.exit_code == 0, relayed.err);
  CHECK(read_file(out) == value);
  CHECK(took < 5.0);

  auto cut = hosts.await([&](const nlohmann::json& s) { return three_hosts::link(s, a, c)["active"] == "relay"; });
  auto l = three_hosts::link(cut, a, c);
  CHECK(l["paths"][0]["kind"] == "tcp");
  CHECK(l["paths"][0]["health"] == "down");
  CHECK(l["paths"][1]["kind"] == "relay");
  CHECK(l["paths"][1]["health"] == "up");
  std::string b_id;
  for (auto& m : cut["members"]) {
    if (m["address"] == hosts.owner_address(host_b)) b_id = m["id"];
  }
  CHECK(l["via"] == b_id);

  // Puts placed across the cut are stored through B too.
  auto across = write_file("across", pattern(1 << 20, 2));
  auto placed = hosts.kv(host_a, {"put", "across", across, "--owner", "owner@" + c});
  REQUIRE_MESSAGE(placed.exit_code == 0, placed.err);
  auto back_on_c = hosts.kv(host_c, {"get", "across", "-o", out});
  REQUIRE_MESSAGE(back_on_c.exit_code == 0, back_on_c.err);
  CHECK(read_file(out) == pattern(1 << 20, 2));

  // Healed, the direct path is retried and taken again.
  hosts.lab().heal(host_a, host_c);
  hosts.await([&](const nlohmann::json& s) { return three_hosts::link(s, a, c)["active"] == "tcp"; });
  auto again = hosts.kv(host_a, {"get", "big", "-o", out});
  REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  CHECK(read_file(out) == value);
  (void)before;
}

TEST_CASE("multihost: with packets lost at random every get returns the right bytes or a typed error by its deadline") {
  three_hosts hosts;
  constexpr int keys = 12;
  for (int i = 0; i < keys; ++i) {
    auto in = write_file("value", pattern(256 << 10, 10 + static_cast<unsigned>(i)));
    auto put = hosts.kv(host_c, {"put", "lossy/" + std::to_string(i), in});
    REQUIRE_MESSAGE(put.exit_code == 0, put.err);
  }
  hosts.lab().lose(5);  // one packet in 5, on every host
  int found = 0;
  double slowest = 0;
  for (int i = 0; i < keys; ++i) {
    auto out = temp_path("got");
    auto t0 = std::chrono::steady_clock::now();
    auto got = hosts.kv(host_a, {"get", "lossy/" + std::to_string(i), "-o", out, "--timeout-ms", "4000"});
    auto took = seconds_since(t0);
    slowest = std::max(slowest, took);
    CAPTURE(i);
    CAPTURE(got.err);
    // The deadline holds: 4 s, and a little for the launcher itself.
    CHECK(took < 5.5);
    if (got.exit_code == 0) {
      CHECK(read_file(out) == pattern(256 << 10, 10 + static_cast<unsigned>(i)));
      ++found;
    } else {
      bool typed = got.err.find("timeout:") != std::string::npos || got.err.find("unavailable:") != std::string::npos;
      CHECK(typed);
    }
  }
  MESSAGE(found << " of " << keys << " gets succeeded under loss; the slowest took " << slowest << " s");
  CHECK(found > 0);
}

TEST_CASE("multihost: with the master's path to host C cut, host C's owner stays up through host B, and puts and gets through it work") {
  three_hosts hosts{host_a};  // the master on host A
  auto a = hosts.owner_address(host_a);
  auto b = hosts.owner_address(host_b);
  auto c = hosts.owner_address(host_c);
  auto before = hosts.status();
  CHECK(three_hosts::member(before, c)["master_via"] == "");
  std::string b_id = three_hosts::member(before, b)["id"];

  hosts.lab().cut(host_a, host_c);
  // The master hears host C's owner through host B before its heartbeat
  // timeout (3 s) runs out ...
  auto relayed = hosts.await([&](const nlohmann::json& s) { return three_hosts::member(s, c)["master_via"] == b_id; });
  CHECK(three_hosts::member(relayed, c)["state"] == "up");
  // ... and goes on hearing it: never down, for well past that timeout.
  auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < 8.0) {
    auto s = hosts.status();
    auto m = three_hosts::member(s, c);
    REQUIRE_MESSAGE(m["state"] == "up", "host C's owner went down with a relay left: " << s.dump());
    CHECK(m["master_via"] == b_id);
    std::this_thread::sleep_for(250ms);
  }

  // Puts and gets through host C's owner: placed and committed by the
  // master through host B, values stored on either side of the cut.
  for (int i = 0; i < 6; ++i) {
    auto value = pattern(64 << 10, 100 + static_cast<unsigned>(i));
    auto in = write_file("value", value);
    std::vector<std::string> put{"put", "cut/" + std::to_string(i), in, "--timeout-ms", "5000"};
    if (i % 2 == 0) {
      put.push_back("--owner");
      put.push_back("owner@" + a);  // across the cut: stored through B too
    }
    auto r = hosts.kv(host_c, put);
    REQUIRE_MESSAGE(r.exit_code == 0, "put " << i << ": " << r.err);
    auto out = temp_path("got");
    auto got = hosts.kv(host_c, {"get", "cut/" + std::to_string(i), "-o", out, "--timeout-ms", "5000"});
    REQUIRE_MESSAGE(got.exit_code == 0, "get " << i << ": " << got.err);
    CHECK(read_file(out) == value);
    auto listed = hosts.kv(host_c, {"ls", "cut/"});
    REQUIRE_MESSAGE(listed.exit_code == 0, listed.err);
  }
  CHECK(three_hosts::member(hosts.status(), c)["state"] == "up");

  // The table says it too.
  auto table = hosts.lab().exec(host_a, sluice_bin, {"status", "--connect", hosts.master_address()});
  REQUIRE_MESSAGE(table.exit_code == 0, table.err);
  CHECK(table.out.find(" via ") != std::string::npos);

  // Healed, the owner goes back to its own link.
  hosts.lab().heal(host_a, host_c);
  auto healed = hosts.await([&](const nlohmann::json& s) { return three_hosts::member(s, c)["master_via"] == ""; });
  CHECK(three_hosts::member(healed, c)["state"] == "up");
}
