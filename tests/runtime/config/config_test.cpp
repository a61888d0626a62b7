#include "runtime/config/load.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using sluice::errc;
using sluice::load_config_string;
using sluice::node_config;
using sluice::placement_policy;

namespace {

/// The message of a failed load; fails the test if the load succeeded.
std::string failure(const sluice::result<node_config>& r, errc expected = errc::invalid_argument) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == expected);
  return r.error().message();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// A file under the temp directory, removed when the test ends.
class temp_path {
 public:
  explicit temp_path(std::string_view stem) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("sluice-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) +
             "-" + std::string(stem));
  }
  ~temp_path() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  temp_path(const temp_path&) = delete;
  temp_path& operator=(const temp_path&) = delete;

  std::string str() const { return path_.string(); }
  void write(const std::string& text) const { std::ofstream(path_, std::ios::binary) << text; }

 private:
  std::filesystem::path path_;
};

constexpr const char* full_example = R"(
[node]
name = "edge-1"
listen = "0.0.0.0:7400"
seed = 42
threads = 8

[wire]
max_envelope = "4MiB"
max_payload = "2GiB"

[master]
heartbeat_interval = "250ms"
heartbeat_timeout = "2s"
placement = "random"
data_dir = "/var/lib/sluice"
fsync = false

[owner]
master = "10.0.0.1:7400"
capacity = "16GiB"
max_value = "1GiB"
reconnect_interval = "2s"
transfer_chunk = "8MiB"
transfer_window = 6
cache_remote = false

[links]
order = ["tcp", "relay"]
timeout = "250ms"
retry = "2s"
retry_max = "1m"

[client]
request_timeout = "30s"

[log]
level = "debug"
)";

}  // namespace

TEST_CASE("config: an empty document gives the defaults") {
  auto r = load_config_string("");
  REQUIRE(r.ok());
  const node_config& c = *r;
  node_config defaults;
  CHECK(c.node.name == defaults.node.name);
  CHECK(c.node.listen.empty());  // the role picks its usual address
  CHECK(c.node.seed == 0);
  CHECK(c.node.threads == 0);  // as many as the CPUs it may run on, at most 2
  CHECK(c.wire.max_envelope_bytes == 1ULL << 20);
  CHECK(c.wire.max_payload_bytes == 1ULL << 30);
  CHECK(c.master.heartbeat_interval == 500ms);
  CHECK(c.master.heartbeat_timeout == 3s);
  CHECK(c.master.placement == placement_policy::local_first);
  CHECK(c.master.data_dir.empty());  // in memory only
  CHECK(c.master.fsync);
  CHECK(c.owner.master.empty());
  CHECK(c.owner.capacity_bytes == 1ULL << 30);
  CHECK(c.owner.max_value_bytes == 256ULL << 20);
  CHECK(c.owner.reconnect_interval == 1s);
  CHECK(c.owner.transfer_chunk_bytes == 4ULL << 20);
  CHECK(c.owner.transfer_window == 4);
  CHECK(c.owner.cache_remote);
  CHECK(c.links.order == std::vector<std::string>{"rdma", "tcp", "relay"});
  CHECK(c.links.timeout == 1s);
  CHECK(c.links.retry == 1s);
  CHECK(c.links.retry_max == 30s);
  CHECK(c.client.request_timeout == 5s);
  CHECK(c.log.level == "info");
  CHECK(c.rdma.device == "auto");  // a device if there is one; never the software provider
  CHECK(c.rdma.soft_fail_read == 0);
  CHECK(c.rdma.soft_read_delay == 0us);
}

TEST_CASE("config: [rdma] names a device choice and the software provider's test knobs") {
  auto r = load_config_string("[rdma]\ndevice = \"soft\"\nsoft_fail_read = 3\nsoft_read_delay = \"20ms\"\n");
  REQUIRE(r.ok());
  CHECK(r->rdma.device == "soft");
  CHECK(r->rdma.soft_fail_read == 3);
  CHECK(r->rdma.soft_read_delay == 20ms);
  CHECK(load_config_string("[rdma]\ndevice = \"off\"\nsoft_read_delay = \"0ms\"\n").ok());
  auto message = failure(load_config_string("[rdma]\ndevice = \"mlx5_0\"\n"));
  CHECK(contains(message, "unknown device 'mlx5_0'; accepted: auto, off, soft"));
  CHECK(contains(failure(load_config_string("[rdma]\nsoft_fail_read = -1\n")), "soft_fail_read"));
}

TEST_CASE("config: [s3] reads the gateway's listen address, buckets, access and bounds") {
  auto d = load_config_string("");
  REQUIRE(d.ok());
  CHECK(d->s3.listen.empty());
  CHECK(d->s3.region == "us-east-1");
  CHECK(d->s3.request_timeout == 15min);
  auto r = load_config_string(
      "[s3]\nlisten = \"127.0.0.1:9000\"\nbuckets = [\"photos=/srv/photos\", \"logs=/var/log/app\"]\n"
      "root = \"/srv/buckets\"\naccess_key = \"admin\"\nsecret_key = \"s3cret\"\ndomain = \"s3.local\"\n"
      "region = \"eu-west-1\"\nthreads = 8\nconnections_max = 100\nrequest_timeout = \"2m\"\n"
      "idle_timeout = \"5s\"\n");
  REQUIRE(r.ok());
  CHECK(r->s3.listen == "127.0.0.1:9000");
  CHECK(r->s3.buckets == std::vector<std::string>{"photos=/srv/photos", "logs=/var/log/app"});
  CHECK(r->s3.root == "/srv/buckets");
  CHECK(r->s3.access_key == "admin");
  CHECK(r->s3.secret_key == "s3cret");
  CHECK(r->s3.domain == "s3.local");
  CHECK(r->s3.region == "eu-west-1");
  CHECK(r->s3.threads == 8);
  CHECK(r->s3.connections_max == 100);
  CHECK(r->s3.request_timeout == 2min);
  CHECK(r->s3.idle_timeout == 5s);
  CHECK_FALSE(r->s3.anonymous);
  CHECK(load_config_string("[s3]\nanonymous = true\n")->s3.anonymous);
  CHECK(contains(failure(load_config_string("[s3]\nbucket = [\"a=b\"]\n")), "did you mean 's3.buckets'"));
  CHECK(contains(failure(load_config_string("[s3]\nbuckets = [\"no-directory\"]\n")), "NAME=DIR"));
  CHECK(contains(failure(load_config_string("[s3]\nbuckets = \"a=b\"\n")), "an array"));
  CHECK(contains(failure(load_config_string("[s3]\nthreads = 0\n")), "threads"));
  CHECK(contains(failure(load_config_string("[s3]\nidle_timeout = \"0s\"\n")), "idle_timeout"));
}

TEST_CASE("config: a document with only comments and empty sections gives the defaults") {
  auto r = load_config_string("# nothing to change\n[owner]\n[log]\n");
  REQUIRE(r.ok());
  CHECK(r->owner.capacity_bytes == 1ULL << 30);
}

TEST_CASE("config: every key is read into its field") {
  auto r = load_config_string(full_example);
  REQUIRE_MESSAGE(r.ok(), r.error().message());
  const node_config& c = *r;
  CHECK(c.node.name == "edge-1");
  CHECK(c.node.listen == "0.0.0.0:7400");
  CHECK(c.node.seed == 42);
  CHECK(c.node.threads == 8);
  CHECK(c.wire.max_envelope_bytes == 4ULL << 20);
  CHECK(c.wire.max_payload_bytes == 2ULL << 30);
  CHECK(c.master.heartbeat_interval == 250ms);
  CHECK(c.master.heartbeat_timeout == 2s);
  CHECK(c.master.placement == placement_policy::random);
  CHECK(c.master.data_dir == "/var/lib/sluice");
  CHECK_FALSE(c.master.fsync);
  CHECK(c.owner.master == "10.0.0.1:7400");
  CHECK(c.owner.capacity_bytes == 16ULL << 30);
  CHECK(c.owner.max_value_bytes == 1ULL << 30);
  CHECK(c.owner.reconnect_interval == 2s);
  CHECK(c.owner.transfer_chunk_bytes == 8ULL << 20);
  CHECK(c.owner.transfer_window == 6);
  CHECK_FALSE(c.owner.cache_remote);
  CHECK(c.links.order == std::vector<std::string>{"tcp", "relay"});
  CHECK(c.links.timeout == 250ms);
  CHECK(c.links.retry == 2s);
  CHECK(c.links.retry_max == 60s);
  CHECK(c.client.request_timeout == 30s);
  CHECK(c.log.level == "debug");
}

TEST_CASE("config: keys left out keep their defaults") {
  auto r = load_config_string("[owner]\ncapacity = \"2GiB\"\n");
  REQUIRE(r.ok());
  CHECK(r->owner.capacity_bytes == 2ULL << 30);
  CHECK(r->owner.max_value_bytes == 256ULL << 20);
  CHECK(r->node.threads == 0);
}

TEST_CASE("config: a size may be a string with a unit or an integer number of bytes") {
  auto r = load_config_string(
      "[owner]\ncapacity = 1048576\nmax_value = \"64 KiB\"\n[wire]\nmax_envelope = \"2MB\"\n");
  REQUIRE(r.ok());
  CHECK(r->owner.capacity_bytes == 1048576);
  CHECK(r->owner.max_value_bytes == 64 * 1024);
  CHECK(r->wire.max_envelope_bytes == 2'000'000);
}

TEST_CASE("config: dotted keys and inline tables are the same as sections") {
  auto dotted = load_config_string("owner.capacity = \"2GiB\"\n");
  REQUIRE(dotted.ok());
  CHECK(dotted->owner.capacity_bytes == 2ULL << 30);
  auto inline_table = load_config_string("owner = { capacity = \"3GiB\" }\n");
  REQUIRE(inline_table.ok());
  CHECK(inline_table->owner.capacity_bytes == 3ULL << 30);
}

TEST_CASE("config: an unknown key is rejected with a suggestion") {
  auto message = failure(load_config_string("[owner]\ncapactiy = \"1GiB\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:2:1:"));
  CHECK(contains(message, "unknown key 'owner.capactiy'"));
  CHECK(contains(message, "did you mean 'owner.capacity'?"));
}

TEST_CASE("config: an unknown key with no close match lists the keys of its section") {
  auto message = failure(load_config_string("[client]\nretries = 3\n", "node.toml"));
  CHECK(contains(message, "node.toml:2:1:"));
  CHECK(contains(message, "unknown key 'client.retries'"));
  CHECK(contains(message, "the keys of [client] are: request_timeout"));
  CHECK_FALSE(contains(message, "did you mean"));
}

TEST_CASE("config: a key in the wrong section is rejected, pointing at the right one") {
  auto message = failure(load_config_string("[node]\ncapacity = \"1GiB\"\n"));
  CHECK(contains(message, "unknown key 'node.capacity'"));
  CHECK(contains(message, "did you mean 'owner.capacity'?"));
}

TEST_CASE("config: an unknown section is rejected with a suggestion") {
  auto message =
      failure(load_config_string("[node]\nthreads = 4\n\n[onwer]\ncapacity = 1\n", "node.toml"));
  CHECK(contains(message, "node.toml:4:1:"));
  CHECK(contains(message, "unknown section 'onwer'"));
  CHECK(contains(message, "did you mean 'owner'?"));
}

TEST_CASE("config: an unknown section with no close match lists the sections") {
  auto message = failure(load_config_string("[storage]\npath = \"/tmp\"\n"));
  CHECK(contains(message, "unknown section 'storage'"));
  CHECK(contains(message, "node, wire, master, owner, links, client, log"));
}

TEST_CASE("config: a key outside any section is rejected, pointing at its section") {
  auto message = failure(load_config_string("capacity = \"1GiB\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:1:1:"));
  CHECK(contains(message, "unknown key 'capacity'"));
  CHECK(contains(message, "every key belongs to a section"));
  CHECK(contains(message, "did you mean 'owner.capacity'?"));
}

TEST_CASE("config: a table nested in a section is an unknown key") {
  auto message = failure(load_config_string("[owner.limits]\nfoo = 1\n"));
  CHECK(contains(message, "unknown key 'owner.limits'"));
}

TEST_CASE("config: a section written as a plain value is rejected") {
  auto message = failure(load_config_string("owner = 5\n"));
  CHECK(contains(message, "key 'owner' must be a table (a [owner] section), found an integer"));
  CHECK(contains(failure(load_config_string("[[owner]]\ncapacity = 1\n")), "found an array"));
}

TEST_CASE("config: a value of the wrong type names the key, the expected type and what was found") {
  auto threads = failure(load_config_string("[node]\nthreads = \"4\"\n", "node.toml"));
  CHECK(contains(threads, "node.toml:2:11:"));
  CHECK(contains(threads, "key 'node.threads' must be an integer, found a string"));
  CHECK(contains(failure(load_config_string("[node]\nname = 3\n")),
                 "key 'node.name' must be a string, found an integer"));
  CHECK(contains(
      failure(load_config_string("[owner]\ncapacity = true\n")),
      "key 'owner.capacity' must be a size (a string with a unit such as \"512MiB\", or an "
      "integer number of bytes), found a boolean"));
  CHECK(contains(failure(load_config_string("[owner]\ncapacity = 1.5\n")), "found a float"));
  CHECK(contains(failure(load_config_string("[master]\nheartbeat_interval = 500\n")),
                 "key 'master.heartbeat_interval' must be a duration"));
  CHECK(contains(failure(load_config_string("[master]\nplacement = 1\n")),
                 "key 'master.placement' must be a string, found an integer"));
  CHECK(contains(failure(load_config_string("[log]\nlevel = [\"info\"]\n")),
                 "key 'log.level' must be a string, found an array"));
  CHECK(contains(failure(load_config_string("[client]\nrequest_timeout = 1979-05-27\n")),
                 "found a date"));
}

TEST_CASE("config: a malformed size names the key and the text") {
  auto message = failure(load_config_string("[owner]\ncapacity = \"1.5GiB\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:2:12:"));
  CHECK(
      contains(message, "key 'owner.capacity': invalid size '1.5GiB': fractions are not accepted"));
  CHECK(contains(failure(load_config_string("[owner]\ncapacity = \"4 gigs\"\n")),
                 "unknown unit 'gigs'"));
  CHECK(contains(failure(load_config_string("[owner]\ncapacity = -1\n")),
                 "key 'owner.capacity': a size must not be negative, found -1"));
}

TEST_CASE("config: a size of zero is rejected where zero is meaningless") {
  CHECK(contains(failure(load_config_string("[owner]\ncapacity = 0\n")),
                 "key 'owner.capacity': must be greater than 0"));
  CHECK(contains(failure(load_config_string("[owner]\nmax_value = \"0MiB\"\n")),
                 "key 'owner.max_value': must be greater than 0"));
  CHECK(contains(failure(load_config_string("[wire]\nmax_payload = 0\n")),
                 "key 'wire.max_payload': must be greater than 0"));
}

TEST_CASE("config: the owner's prefetch bound is a size, 0 turning prefetching off") {
  auto defaults = load_config_string("");
  REQUIRE(defaults.ok());
  CHECK(defaults->owner.mq_prefetch_bytes == 256ULL << 20);
  auto off = load_config_string("[owner]\nmq_prefetch = 0\n");
  REQUIRE(off.ok());
  CHECK(off->owner.mq_prefetch_bytes == 0);
  auto sized = load_config_string("[owner]\nmq_prefetch = \"1GiB\"\n");
  REQUIRE(sized.ok());
  CHECK(sized->owner.mq_prefetch_bytes == 1ULL << 30);
  CHECK(contains(failure(load_config_string("[owner]\nmq_prefetch = true\n")), "key 'owner.mq_prefetch'"));
  CHECK(contains(failure(load_config_string("[owner]\nmq_prefetch = \"lots\"\n")), "key 'owner.mq_prefetch'"));
}

TEST_CASE("config: the envelope limit is at least 64 bytes") {
  CHECK(contains(failure(load_config_string("[wire]\nmax_envelope = 63\n")),
                 "key 'wire.max_envelope': must be at least 64 B, found 63 B"));
  auto r = load_config_string("[wire]\nmax_envelope = \"64B\"\n");
  REQUIRE(r.ok());
  CHECK(r->wire.max_envelope_bytes == 64);
}

TEST_CASE("config: a duration needs a unit and must be greater than zero") {
  auto message = failure(load_config_string("[client]\nrequest_timeout = \"500\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:2:19:"));
  CHECK(contains(message,
                 "key 'client.request_timeout': invalid duration '500': a unit is required"));
  CHECK(contains(failure(load_config_string("[owner]\nreconnect_interval = \"0s\"\n")),
                 "key 'owner.reconnect_interval': must be greater than 0"));
  CHECK(contains(failure(load_config_string("[master]\nheartbeat_interval = \"99999999999h\"\n")),
                 "too long"));
}

TEST_CASE("config: the heartbeat timeout must exceed the heartbeat interval") {
  auto message = failure(load_config_string(
      "[master]\nheartbeat_interval = \"2s\"\nheartbeat_timeout = \"1s\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:3:21:"));
  CHECK(contains(
      message,
      "master.heartbeat_timeout (1s) must be greater than master.heartbeat_interval (2s)"));
  CHECK(contains(
      failure(load_config_string("[master]\nheartbeat_timeout = \"500ms\"\n")),
      "master.heartbeat_timeout (500ms) must be greater than master.heartbeat_interval (500ms)"));
  CHECK(
      load_config_string("[master]\nheartbeat_interval = \"1s\"\nheartbeat_timeout = \"1001ms\"\n")
          .ok());
}

TEST_CASE("config: the largest value must fit in the largest wire payload") {
  auto message = failure(load_config_string(
      "[wire]\nmax_payload = \"128MiB\"\n[owner]\nmax_value = \"256MiB\"\n", "node.toml"));
  CHECK(contains(message, "node.toml:4:13:"));
  CHECK(contains(message, "owner.max_value (256 MiB) must not exceed wire.max_payload (128 MiB)"));
  // The default max_value (256 MiB) against a small payload limit, with no line to point at
  // for max_value, points at max_payload instead.
  auto defaulted = failure(load_config_string("[wire]\nmax_payload = \"1MiB\"\n", "node.toml"));
  CHECK(contains(defaulted, "node.toml:2:15:"));
  CHECK(load_config_string("[wire]\nmax_payload = \"256MiB\"\n").ok());
}

TEST_CASE("config: a transfer piece is at least 4 KiB and fits in one wire payload, and the window is 1 to 64") {
  CHECK(contains(failure(load_config_string("[owner]\ntransfer_chunk = \"1KiB\"\n")),
                 "key 'owner.transfer_chunk': must be at least 4 KiB"));
  auto message = failure(load_config_string("[wire]\nmax_payload = \"512MiB\"\n[owner]\nmax_value = \"8MiB\"\n"
                                            "transfer_chunk = \"1GiB\"\n"));
  CHECK(contains(message, "owner.transfer_chunk (1 GiB) must not exceed wire.max_payload (512 MiB)"));
  CHECK(contains(failure(load_config_string("[owner]\ntransfer_window = 0\n")), "must be from 1 to 64, found 0"));
  CHECK(contains(failure(load_config_string("[owner]\ntransfer_window = 65\n")), "must be from 1 to 64, found 65"));
  CHECK(contains(failure(load_config_string("[owner]\ncache_remote = \"yes\"\n")), "must be true or false"));
  CHECK(load_config_string("[owner]\ntransfer_chunk = \"4KiB\"\ntransfer_window = 64\n").ok());
}

TEST_CASE("config: the path order names known paths once each, tcp among them") {
  CHECK(contains(failure(load_config_string("[links]\norder = [\"tcp\", \"udp\"]\n")),
                 "unknown path 'udp'; accepted: shm, rdma, tcp, relay"));
  CHECK(contains(failure(load_config_string("[links]\norder = [\"tcp\", \"relya\"]\n")), "did you mean 'relay'?"));
  CHECK(contains(failure(load_config_string("[links]\norder = [\"tcp\", \"tcp\"]\n")), "path 'tcp' is listed twice"));
  CHECK(contains(failure(load_config_string("[links]\norder = [\"rdma\", \"relay\"]\n")), "must name \"tcp\""));
  CHECK(contains(failure(load_config_string("[links]\norder = \"tcp\"\n")), "must be an array of path names"));
  CHECK(contains(failure(load_config_string("[links]\norder = [\"tcp\", 3]\n")), "must be a string, found an integer"));
  CHECK(load_config_string("[links]\norder = [\"tcp\"]\n").ok());
}

TEST_CASE("config: the longest wait between retries of a path is not below the first") {
  auto message = failure(load_config_string("[links]\nretry = \"10s\"\nretry_max = \"5s\"\n"));
  CHECK(contains(message, "links.retry_max (5s) must not be below links.retry (10s)"));
  CHECK(load_config_string("[links]\nretry = \"5s\"\nretry_max = \"5s\"\n").ok());
}

TEST_CASE("config: the placement policy is local-first or random") {
  auto first = load_config_string("[master]\nplacement = \"local-first\"\n");
  REQUIRE(first.ok());
  CHECK(first->master.placement == placement_policy::local_first);
  auto message = failure(load_config_string("[master]\nplacement = \"local_first\"\n"));
  CHECK(contains(message, "key 'master.placement': unknown placement policy 'local_first'"));
  CHECK(contains(message, "accepted: local-first, random"));
  CHECK(contains(message, "did you mean 'local-first'?"));
}

TEST_CASE("config: placement names parse and print both ways") {
  for (auto p : {placement_policy::local_first, placement_policy::random}) {
    auto parsed = sluice::parse_placement(sluice::to_string(p));
    REQUIRE(parsed.ok());
    CHECK(*parsed == p);
  }
  auto bad = sluice::parse_placement("nearest");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(contains(bad.error().message(), "'nearest'"));
}

TEST_CASE("config: every log level is accepted and others are rejected") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    auto r = load_config_string(std::string("[log]\nlevel = \"") + level + "\"\n");
    REQUIRE(r.ok());
    CHECK(r->log.level == level);
  }
  auto message = failure(load_config_string("[log]\nlevel = \"warning\"\n"));
  CHECK(contains(message, "key 'log.level': unknown level 'warning'"));
  CHECK(contains(message, "trace, debug, info, warn, error, off"));
  CHECK(
      contains(failure(load_config_string("[log]\nlevel = \"debgu\"\n")), "did you mean 'debug'?"));
}

TEST_CASE("config: the seed is a non-negative integer") {
  auto big = load_config_string("[node]\nseed = 9223372036854775807\n");
  REQUIRE(big.ok());
  CHECK(big->node.seed == 9223372036854775807ULL);
  CHECK(contains(failure(load_config_string("[node]\nseed = -1\n")),
                 "key 'node.seed': must be a non-negative integer, found -1"));
}

TEST_CASE("config: the thread count is from 0 (as many as the CPUs allow) to 64") {
  CHECK(load_config_string("[node]\nthreads = 0\n")->node.threads == 0);
  CHECK(load_config_string("[node]\nthreads = 1\n")->node.threads == 1);
  CHECK(load_config_string("[node]\nthreads = 64\n")->node.threads == 64);
  CHECK(contains(failure(load_config_string("[node]\nthreads = 65\n")),
                 "key 'node.threads': must be from 0 to 64, found 65"));
  CHECK(contains(failure(load_config_string("[node]\nthreads = -1\n")), "found -1"));
}

TEST_CASE("config: a TOML syntax error names the file, line and column") {
  auto message = failure(load_config_string("[node]\nthreads = = 4\n", "node.toml"));
  CHECK(contains(message, "node.toml:2:"));
  CHECK(contains(message, "invalid TOML"));
  CHECK(contains(failure(load_config_string("[owner]\ncapacity = 1\ncapacity = 2\n")),
                 "invalid TOML"));
}

TEST_CASE("config: a string source without a name is called <string>") {
  CHECK(contains(failure(load_config_string("[xyz]\n")), "<string>:1:1:"));
}

TEST_CASE("config: a file is read and its errors name its path") {
  temp_path file("good.toml");
  file.write(full_example);
  auto r = sluice::load_config_file(file.str());
  REQUIRE(r.ok());
  CHECK(r->owner.capacity_bytes == 16ULL << 30);

  temp_path bad("bad.toml");
  bad.write("[owner]\ncapactiy = 1\n");
  auto message = failure(sluice::load_config_file(bad.str()));
  CHECK(contains(message, bad.str() + ":2:1:"));
  CHECK(contains(message, "did you mean 'owner.capacity'?"));
}

TEST_CASE("config: a missing file is not_found") {
  temp_path missing("missing.toml");
  auto message = failure(sluice::load_config_file(missing.str()), errc::not_found);
  CHECK(message == "config file '" + missing.str() + "' not found");
}

TEST_CASE("config: a directory or an unreadable file is invalid_argument") {
  temp_path dir("dir");
  std::filesystem::create_directory(dir.str());
  CHECK(contains(failure(sluice::load_config_file(dir.str())), "is a directory"));

  temp_path locked("locked.toml");
  locked.write("[node]\n");
  std::filesystem::permissions(locked.str(), std::filesystem::perms::none);
  if (std::ifstream(locked.str()).good()) return;  // root reads anything; nothing to test
  CHECK(contains(failure(sluice::load_config_file(locked.str())), "cannot be read"));
}

TEST_CASE("config: a file larger than a config file can be is refused") {
  temp_path huge("huge.toml");
  huge.write(std::string((1 << 20) + 1, '#'));
  CHECK(contains(failure(sluice::load_config_file(huge.str())), "is it the right file?"));
}

TEST_CASE("config: without an [owner.gpu] section the owner has no GPU pools") {
  auto r = load_config_string("[owner]\ncapacity = \"64MiB\"\n");
  REQUIRE(r.ok());
  CHECK_FALSE(r->owner.gpu.enabled);
}

TEST_CASE("config: [owner.gpu] names the devices and the capacity of each pool") {
  auto r = load_config_string("[owner.gpu]\ndevices = [1, 0]\ncapacity = \"8GiB\"\n");
  REQUIRE(r.ok());
  CHECK(r->owner.gpu.enabled);
  CHECK(r->owner.gpu.devices == std::vector<std::uint32_t>{1, 0});
  CHECK(r->owner.gpu.capacity_bytes == 8ULL << 30);
}

TEST_CASE("config: an empty [owner.gpu] section turns GPU pools on with the defaults") {
  for (auto text : {"[owner.gpu]\n", "owner.gpu = {}\n", "[owner]\ngpu = {}\n"}) {
    auto r = load_config_string(text);
    REQUIRE(r.ok());
    CHECK(r->owner.gpu.enabled);
    CHECK(r->owner.gpu.devices == std::vector<std::uint32_t>{0});
    CHECK(r->owner.gpu.capacity_bytes == 1ULL << 30);
  }
}

TEST_CASE("config: an unknown key in [owner.gpu] is rejected with a suggestion") {
  auto message = failure(load_config_string("[owner.gpu]\ndevics = [0]\n"));
  CHECK(contains(message, "<string>:2:1: unknown key 'owner.gpu.devics'; did you mean 'owner.gpu.devices'?"));
  message = failure(load_config_string("[owner.gpu]\nstreams = 4\n"));
  CHECK(contains(message, "unknown key 'owner.gpu.streams'; the keys of [owner.gpu] are: devices, capacity"));
}

TEST_CASE("config: [owner.gpu] devices must be distinct ordinals, at least one") {
  CHECK(contains(failure(load_config_string("[owner.gpu]\ndevices = [0, 0]\n")), "device 0 is listed twice"));
  CHECK(contains(failure(load_config_string("[owner.gpu]\ndevices = []\n")), "must name at least one device"));
  CHECK(contains(failure(load_config_string("[owner.gpu]\ndevices = [64]\n")),
                 "key 'owner.gpu.devices': must be from 0 to 63, found 64"));
  CHECK(contains(failure(load_config_string("[owner.gpu]\ndevices = 0\n")), "must be an array of CUDA device ordinals"));
  CHECK(contains(failure(load_config_string("[owner.gpu]\ndevices = [\"0\"]\n")), "must be an integer, found a string"));
}

TEST_CASE("config: [owner.gpu] capacity is a size of at least 1 MiB") {
  CHECK(contains(failure(load_config_string("[owner.gpu]\ncapacity = \"512KiB\"\n")),
                 "key 'owner.gpu.capacity': must be at least 1 MiB, found 512 KiB"));
  CHECK(contains(failure(load_config_string("[owner.gpu]\ncapacity = \"1.5GiB\"\n")), "fractions are not accepted"));
  auto r = load_config_string("[owner.gpu]\ncapacity = 1048576\n");
  REQUIRE(r.ok());
  CHECK(r->owner.gpu.capacity_bytes == 1ULL << 20);
}

TEST_CASE("config: owner.gpu written as a plain value is rejected") {
  CHECK(contains(failure(load_config_string("[owner]\ngpu = true\n")),
                 "key 'owner.gpu' must be a table (a [owner.gpu] section), found a boolean"));
}
