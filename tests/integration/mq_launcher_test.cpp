// `sluice mq create | produce | ls | consume | status | rm` against a
// running cluster.

#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/support/nodes.hpp"

namespace {

using namespace sluice::test;

std::string write_file(const std::string& text) {
  auto path = temp_path("payload.bin");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

}  // namespace

TEST_CASE("launcher: sluice mq creates a topic, produces, consumes with acks and shows the lag") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto& at = node.address;
  auto created = run(sluice_bin, {"mq", "create", "jobs", "--partitions", "2", "--connect", at});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  for (auto* text : {"first", "second", "third"}) {
    auto produced = run(sluice_bin, {"mq", "produce", "jobs", write_file(text), "--key", "k", "--connect", at});
    REQUIRE_MESSAGE(produced.exit_code == 0, produced.err);
    CHECK(produced.out.find("offset=") != std::string::npos);
  }
  auto ls = run(sluice_bin, {"mq", "ls", "--json", "--connect", at});
  REQUIRE(ls.exit_code == 0);
  auto topics = nlohmann::json::parse(ls.out);
  REQUIRE(topics.size() == 1);
  CHECK(topics[0]["name"] == "jobs");
  CHECK(topics[0]["partitions"].size() == 2);

  auto two = run(sluice_bin, {"mq", "consume", "jobs", "--group", "g", "-n", "2", "--connect", at});
  REQUIRE_MESSAGE(two.exit_code == 0, two.err);
  CHECK(two.out == "firstsecond");  // one key: one partition, in order
  auto status = run(sluice_bin, {"mq", "status", "g", "--json", "--connect", at});
  REQUIRE(status.exit_code == 0);
  std::uint64_t lag = 0;
  for (auto& p : nlohmann::json::parse(status.out)) lag += p["lag_messages"].get<std::uint64_t>();
  CHECK(lag == 1);
  auto last = run(sluice_bin, {"mq", "consume", "jobs", "--group", "g", "-n", "1", "--connect", at});
  REQUIRE(last.exit_code == 0);
  CHECK(last.out == "third");
  // Nothing left: consume gives up after --wait.
  CHECK(run(sluice_bin, {"mq", "consume", "jobs", "--group", "g", "--wait", "200ms", "--connect", at}).exit_code == 1);

  // Bad input: a bad name, an unknown topic, an unknown policy.
  auto bad = run(sluice_bin, {"mq", "create", "bad/name", "--connect", at});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("invalid_argument") != std::string::npos);
  auto unknown = run(sluice_bin, {"mq", "produce", "nope", write_file("x"), "--connect", at});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("not_found") != std::string::npos);
  CHECK(run(sluice_bin, {"mq", "create", "t", "--when-full", "sometimes", "--connect", at}).exit_code == 2);
  CHECK(run(sluice_bin, {"mq", "rm", "jobs", "--connect", at}).exit_code == 0);
  CHECK(run(sluice_bin, {"mq", "rm", "jobs", "--connect", at}).exit_code == 1);
}

TEST_CASE("launcher: sluice mq create --dead-letter names the topic in ls, and consume shows message ids") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto& at = node.address;
  auto created = run(sluice_bin, {"mq", "create", "jobs", "--dead-letter", "jobs.dead", "--connect", at});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  auto self = run(sluice_bin, {"mq", "create", "loop", "--dead-letter", "loop", "--connect", at});
  CHECK(self.exit_code == 1);
  CHECK(self.err.find("invalid_argument") != std::string::npos);
  auto ls = run(sluice_bin, {"mq", "ls", "--json", "--connect", at});
  REQUIRE(ls.exit_code == 0);
  auto topics = nlohmann::json::parse(ls.out);
  REQUIRE(topics.size() == 1);
  CHECK(topics[0]["dead_letter"] == "jobs.dead");
  auto lines = run(sluice_bin, {"mq", "ls", "--connect", at});
  CHECK(lines.out.find("dead_letter=jobs.dead") != std::string::npos);
  auto produced = run(sluice_bin, {"mq", "produce", "jobs", write_file("x"), "--message-id", "job-9", "--connect", at});
  REQUIRE_MESSAGE(produced.exit_code == 0, produced.err);
  auto got = run(sluice_bin, {"mq", "consume", "jobs", "--group", "g", "--connect", at});
  REQUIRE_MESSAGE(got.exit_code == 0, got.err);
  CHECK(got.out == "x");
  CHECK(got.err.find("id=job-9") != std::string::npos);
}
