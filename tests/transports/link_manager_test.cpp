#include "transports/link_manager.hpp"

#include <doctest/doctest.h>

namespace sluice::transport {
namespace {

using namespace std::chrono_literals;
using time_point = link_manager::time_point;

constexpr std::uint64_t peer = 0xc;
const time_point t0{std::chrono::seconds{1000}};

link_manager three_paths() { return link_manager{link_policy{}}; }

TEST_CASE("links: the best path in the configured order is chosen while it is healthy") {
  auto links = three_paths();
  CHECK(links.choose(peer, t0) == path_kind::rdma);
  CHECK(links.plan(peer, t0) == std::vector{path_kind::rdma, path_kind::tcp, path_kind::relay});
  link_manager tcp_first{link_policy{{path_kind::tcp, path_kind::relay}}};
  CHECK(tcp_first.choose(peer, t0) == path_kind::tcp);
}

TEST_CASE("links: a path that is not available, like rdma without a device, is never chosen") {
  auto links = three_paths();
  links.set_available(path_kind::rdma, false);
  CHECK(links.choose(peer, t0) == path_kind::tcp);
  links.failed(peer, path_kind::tcp, t0, "cut");
  links.failed(peer, path_kind::relay, t0, "cut");
  // Even with every other path down, rdma stays out.
  CHECK(links.plan(peer, t0) == std::vector{path_kind::tcp, path_kind::relay});
  CHECK(links.report(t0).at(0).paths.size() == 2);
  CHECK(links.due_retries(t0 + 1h).size() == 2);
}

TEST_CASE("links: a failed path is demoted and the next one in the order takes over") {
  auto links = three_paths();
  links.set_available(path_kind::rdma, false);
  CHECK(links.failed(peer, path_kind::tcp, t0, "timeout: no reply"));
  CHECK_FALSE(links.failed(peer, path_kind::tcp, t0, "again"));  // already down
  CHECK(links.choose(peer, t0) == path_kind::relay);
  // The demoted path stays in the plan, last, as a resort.
  CHECK(links.plan(peer, t0) == std::vector{path_kind::relay, path_kind::tcp});
  // Other peers are not affected.
  CHECK(links.choose(peer + 1, t0) == path_kind::tcp);
}

TEST_CASE("links: a demoted path is retried after a backoff that doubles up to its bound, and a success restores it") {
  link_manager links{link_policy{{path_kind::tcp, path_kind::relay}, 1s, 4s}};
  links.failed(peer, path_kind::tcp, t0, "cut");
  CHECK(links.due_retries(t0 + 999ms).empty());
  auto due = links.due_retries(t0 + 1s);
  REQUIRE(due.size() == 1);
  CHECK(due[0] == std::pair{peer, path_kind::tcp});
  // Handed out once per backoff, even when no answer comes.
  CHECK(links.due_retries(t0 + 1s).empty());

  links.failed(peer, path_kind::tcp, t0 + 1s, "still cut");  // 2 in a row: 2 s
  CHECK(links.due_retries(t0 + 2999ms).empty());
  CHECK(links.due_retries(t0 + 3s).size() == 1);
  links.failed(peer, path_kind::tcp, t0 + 3s, "still cut");  // 4 s
  links.failed(peer, path_kind::tcp, t0 + 7s, "still cut");  // would be 8 s: bounded at 4 s
  CHECK(links.report(t0 + 7s).at(0).paths.at(0).retry_in == 4s);
  CHECK(links.report(t0 + 7s).at(0).paths.at(0).failures == 4);

  links.succeeded(peer, path_kind::tcp, t0 + 11s);
  CHECK(links.choose(peer, t0 + 11s) == path_kind::tcp);
  auto report = links.report(t0 + 11s).at(0);
  CHECK(report.active == path_kind::tcp);
  CHECK(report.paths.at(0).health == path_health::up);
  CHECK(report.paths.at(0).failures == 0);
  CHECK(links.due_retries(t0 + 1h).empty());
}

TEST_CASE("links: the report names each peer, its active path, its relay and each path's last error") {
  auto links = three_paths();
  links.set_available(path_kind::rdma, false);
  links.choose(7, t0);
  links.choose(3, t0);
  links.set_name(3, "owner-c");
  links.failed(3, path_kind::tcp, t0, "timeout: no reply before the deadline");
  links.succeeded(3, path_kind::relay, t0);
  links.set_via(3, 0xb);
  auto report = links.report(t0);
  REQUIRE(report.size() == 2);
  CHECK(report[0].peer == 3);  // by id
  CHECK(report[0].name == "owner-c");
  CHECK(report[0].active == path_kind::relay);
  CHECK(report[0].via == 0xb);
  CHECK(report[0].paths[0].kind == path_kind::tcp);
  CHECK(report[0].paths[0].health == path_health::down);
  CHECK(report[0].paths[0].last_error == "timeout: no reply before the deadline");
  CHECK(report[0].paths[0].retry_in == 1s);
  CHECK(report[1].active == path_kind::tcp);
  CHECK(report[1].paths[0].health == path_health::untried);
}

TEST_CASE("links: beyond the bound on peers the one used least recently is forgotten") {
  link_manager links{link_policy{{path_kind::tcp}, 1s, 30s, 2}};
  links.choose(1, t0);
  links.choose(2, t0 + 1s);
  links.choose(1, t0 + 2s);  // 2 is now the least recent
  links.choose(3, t0 + 3s);
  CHECK(links.peer_count() == 2);
  auto report = links.report(t0 + 3s);
  CHECK(report[0].peer == 1);
  CHECK(report[1].peer == 3);
}

TEST_CASE("links: path kinds parse and print both ways") {
  for (auto kind : {path_kind::shm, path_kind::rdma, path_kind::tcp, path_kind::relay}) {
    CHECK(parse_path_kind(to_string(kind)) == kind);
  }
  CHECK_FALSE(parse_path_kind("udp").has_value());
}

}  // namespace
}  // namespace sluice::transport

namespace sluice::transport {
namespace {

TEST_CASE("links: the bytes each path carried add up in the report, whatever its health") {
  link_manager links{link_policy{}};
  const time_point t{std::chrono::seconds{1000}};
  links.carried(0xc, path_kind::rdma, 64 << 20, t);
  links.failed(0xc, path_kind::rdma, t, "remote access error");
  links.carried(0xc, path_kind::tcp, 1000, t);
  links.carried(0xc, path_kind::tcp, 24, t);
  auto report = links.report(t).at(0);
  REQUIRE(report.paths.size() == 3);
  CHECK(report.paths[0].kind == path_kind::rdma);
  CHECK(report.paths[0].bytes == 64u << 20);
  CHECK(report.paths[0].health == path_health::down);
  CHECK(report.paths[1].bytes == 1024);
  CHECK(report.paths[2].bytes == 0);
  CHECK(report.active == path_kind::tcp);
}

}  // namespace
}  // namespace sluice::transport
