// The launcher's handling of bad input: wrong flags, bad config files,
// unreachable nodes. Each must print a clear error and exit non-zero.

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>

#include "tests/support/process.hpp"

namespace {

const std::string sluice_bin = SLUICE_BINARY;

std::string write_file(const std::string& text) {
  auto path = sluice::test::temp_path("config.toml");
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("launcher: --help works for every command") {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--help"}, {"up", "--help"}, {"master", "--help"}, {"owner", "--help"},
           {"kv", "--help"}, {"kv", "put", "--help"}, {"kv", "get", "--help"},
           {"kv", "rm", "--help"}, {"kv", "ls", "--help"}, {"kv", "count", "--help"},
           {"kv", "pin", "--help"}, {"kv", "unpin", "--help"}, {"status", "--help"}}) {
    auto r = sluice::test::run(sluice_bin, args);
    CHECK_MESSAGE(r.exit_code == 0, args.front());
    CHECK(contains(r.out, "Usage"));
  }
}

TEST_CASE("launcher: an unknown flag is rejected with exit code 2") {
  auto r = sluice::test::run(sluice_bin, {"master", "--listne", "127.0.0.1:0"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--listne"));
}

TEST_CASE("launcher: a command without its required argument is rejected") {
  auto r = sluice::test::run(sluice_bin, {"kv", "get"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "KEY"));
}

TEST_CASE("launcher: a config file with an unknown key is rejected before the node starts") {
  auto path = write_file("[owner]\ncapactiy = \"1GiB\"\n");
  auto r = sluice::test::run(sluice_bin, {"master", "--config", path, "--listen", "127.0.0.1:0"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "owner.capactiy"));
  CHECK(contains(r.err, "capacity"));
  std::remove(path.c_str());
}

TEST_CASE("launcher: a config file with a bad size is rejected") {
  auto path = write_file("[owner]\ncapacity = \"lots\"\n");
  auto r = sluice::test::run(sluice_bin, {"up", "--config", path, "--listen", "127.0.0.1:0",
                                          "--master-listen", "127.0.0.1:0"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "owner.capacity"));
  std::remove(path.c_str());
}

TEST_CASE("launcher: a missing config file is rejected") {
  auto r = sluice::test::run(sluice_bin, {"master", "--config", "/nonexistent/sluice.toml"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "/nonexistent/sluice.toml"));
}

TEST_CASE("launcher: an owner without a master address is told what to give") {
  auto r = sluice::test::run(sluice_bin, {"owner", "--listen", "127.0.0.1:0"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--master"));
}

TEST_CASE("launcher: kv against an address where nothing listens fails with unavailable") {
  auto r = sluice::test::run(sluice_bin, {"kv", "get", "k", "--connect", "127.0.0.1:1", "--timeout-ms", "2000"});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "unavailable"));
}

TEST_CASE("launcher: an unparsable listen address is rejected") {
  auto r = sluice::test::run(sluice_bin, {"master", "--listen", "not-an-address"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "not-an-address"));
}

TEST_CASE("launcher: a long sim sweep stops on SIGTERM or SIGINT with the summary of the seeds run so far") {
  for (int sig : {SIGTERM, SIGINT}) {
    sluice::test::process sim{sluice_bin, {"sim", "--seeds", "1..100000", "--faults", "light", "--duration", "2s"}};
    // The first progress line comes after about two seconds of seeds.
    bool progress = false;
    for (int lines = 0; lines < 1000 && !progress; ++lines) {
      auto line = sim.read_line(std::chrono::seconds{30});
      if (!line) break;
      progress = line->starts_with("[");
    }
    REQUIRE(progress);
    sim.signal(sig);
    auto code = sim.wait(std::chrono::seconds{20});
    REQUIRE(code.has_value());
    CHECK(*code == 128 + sig);
    auto out = sim.read_all(std::chrono::seconds{5});
    CHECK(contains(out, sig == SIGTERM ? "stopped by SIGTERM after " : "stopped by SIGINT after "));
    CHECK(contains(out, " seeds: "));
    CHECK(contains(out, " of 100000 seeds"));
    CHECK(contains(out, "figure sim_speedup"));
  }
}

TEST_CASE("launcher: sim --think sets how dense the workload is, and a pause out of range is refused") {
  auto operations = [](const std::string& think) {
    auto r = sluice::test::run(sluice_bin, {"sim", "--seed", "3", "--owners", "2", "--clients", "2", "--duration",
                                            "3s", "--faults", "none", "--think", think});
    REQUIRE_MESSAGE(r.exit_code == 0, (r.out + r.err));
    // "seed 3: passed, ... 2 clients, N operations (...)"
    auto at = r.out.find(" operations");
    REQUIRE(at != std::string::npos);
    auto from = r.out.rfind(' ', at - 1) + 1;
    return std::stoull(r.out.substr(from, at - from));
  };
  auto sparse = operations("50ms");
  auto dense = operations("5ms");
  CHECK(sparse > 0);
  CHECK(dense > 5 * sparse);
  for (auto bad : {"10us", "1m", "fast"}) {
    auto r = sluice::test::run(sluice_bin, {"sim", "--think", bad});
    CHECK_MESSAGE(r.exit_code == 2, bad);
    CHECK(contains(r.err, "--think"));
  }
}
