// The public client API against in-process clusters.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <cstring>

#include "sluice/client.hpp"
#include "sluice/dict.hpp"
#include "sluice/node.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;

std::unique_ptr<sluice::local_cluster> start_cluster(std::string config = {}) {
  sluice::local_cluster_options options;
  options.config_text = std::move(config);
  auto c = sluice::local_cluster::start(options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

std::unique_ptr<sluice::client> connect(const sluice::local_cluster& cluster) {
  auto c = cluster.connect();
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

}  // namespace

TEST_CASE("kv: a get after delete returns not_found") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  REQUIRE(kv->put("k", "v").ok());
  CHECK(kv->get("k").value().str() == "v");
  CHECK(kv->remove("k").value());
  CHECK(kv->get("k").code() == errc::not_found);
  CHECK_FALSE(kv->remove("k").value());
  CHECK_FALSE(kv->exists("k").value());
}

TEST_CASE("kv: the last committed put wins and versions grow") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  auto v1 = kv->put("k", "one").value();
  auto v2 = kv->put("k", "two").value();
  CHECK(v2 > v1);
  auto got = kv->get("k").value();
  CHECK(got.str() == "two");
  CHECK(got.version() == v2);
}

TEST_CASE("kv: binary keys and values, and empty values, round-trip") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  std::string key{"a\0b\xff", 4};
  std::string value{"\0\1\2\0", 4};
  REQUIRE(kv->put(key, value).ok());
  CHECK(kv->get(key).value().str() == value);
  REQUIRE(kv->put("empty", "").ok());
  auto empty = kv->get("empty").value();
  CHECK(empty.size() == 0);
  CHECK(kv->exists("empty").value());
}

TEST_CASE("kv: bad keys are rejected with invalid_argument before anything is sent") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  CHECK(kv->put("", "v").code() == errc::invalid_argument);
  CHECK(kv->get(std::string(5000, 'k')).code() == errc::invalid_argument);
  CHECK(kv->remove("").code() == errc::invalid_argument);
}

TEST_CASE("kv: an oversize value is rejected with invalid_argument and loses nothing") {
  auto cluster = start_cluster("[owner]\nmax_value = \"1KiB\"\n");
  auto kv = connect(*cluster);
  REQUIRE(kv->put("k", "small").ok());
  auto big = kv->put("k", std::string(2048, 'x'));
  CHECK(big.code() == errc::invalid_argument);
  CHECK(kv->get("k").value().str() == "small");
}

TEST_CASE("kv: a full owner that does not evict answers no_capacity and keeps what it had") {
  auto cluster = start_cluster("[owner]\ncapacity = \"4KiB\"\neviction = \"none\"\n");
  auto kv = connect(*cluster);
  REQUIRE(kv->put("a", std::string(3000, 'a')).ok());
  auto full = kv->put("b", std::string(3000, 'b'));
  CHECK(full.code() == errc::no_capacity);
  CHECK(kv->get("a").value().str() == std::string(3000, 'a'));
  CHECK(kv->get("b").code() == errc::not_found);
  REQUIRE(kv->remove("a").value());
  CHECK(kv->put("b", std::string(3000, 'b')).ok());
}

TEST_CASE("kv: async calls deliver through callbacks and futures") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  std::string payload = "async";
  auto put = kv->put_async("k", std::as_bytes(std::span{payload.data(), payload.size()}));
  REQUIRE(put.get().ok());
  std::promise<std::string> seen;
  kv->get_async("k", [&seen](sluice::result<sluice::value> v) {
    seen.set_value(v ? v->to_string() : v.error().to_string());
  });
  CHECK(seen.get_future().get() == "async");
  CHECK(kv->get_async("k").get().value().str() == "async");
}

TEST_CASE("kv: many threads put and get concurrently through one client") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&kv, &failures, t] {
      for (int i = 0; i < 100; ++i) {
        auto key = "t" + std::to_string(t) + "/" + std::to_string(i);
        auto value = key + std::string(static_cast<std::size_t>(i), '.');
        if (!kv->put(key, value).ok()) ++failures;
        auto got = kv->get(key);
        if (!got || got->str() != value) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(kv->status().value().object_count == 400);
}

TEST_CASE("kv: a node that never answers makes calls fail at their deadline") {
  // A listener that accepts and then ignores everything.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(listen(fd, 4) == 0);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  auto address = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));

  sluice::client_options options;
  options.connect_timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  auto c = sluice::client::connect(address, options);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(c.code() == errc::unavailable);
  CHECK(took < 5s);
  ::close(fd);
}

TEST_CASE("kv: calls after the cluster stopped fail with a typed error") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  REQUIRE(kv->put("k", "v").ok());
  cluster.reset();
  auto r = kv->get("k", {300ms});
  REQUIRE_FALSE(r.ok());
  CHECK((r.code() == errc::unavailable || r.code() == errc::timeout));
}

TEST_CASE("kv: with random placement, values land on several owners and every owner serves every key") {
  sluice::node_options master_options;
  master_options.config_text = "[master]\nplacement = \"random\"\n";
  master_options.listen = "127.0.0.1:0";
  auto master = sluice::node::start_master(master_options);
  REQUIRE(master.ok());
  std::vector<std::unique_ptr<sluice::node>> owners;
  for (int i = 0; i < 3; ++i) {
    sluice::node_options owner_options;
    owner_options.listen = "127.0.0.1:0";
    owner_options.master = (*master)->address();
    auto o = sluice::node::start_owner(owner_options);
    REQUIRE(o.ok());
    owners.push_back(std::move(*o));
  }
  std::vector<std::unique_ptr<sluice::client>> clients;
  for (auto& o : owners) {
    auto c = sluice::client::connect(o->address());
    REQUIRE(c.ok());
    clients.push_back(std::move(*c));
  }
  // Wait until all three owners have registered.
  for (int i = 0; i < 500; ++i) {
    auto s = clients[0]->status();
    if (s && s->members.size() == 3) break;
    std::this_thread::sleep_for(10ms);
  }
  for (int i = 0; i < 30; ++i) {
    auto& writer = clients[static_cast<std::size_t>(i) % 3];
    REQUIRE(writer->put("k" + std::to_string(i), "v" + std::to_string(i)).ok());
  }
  for (auto& reader : clients) {
    for (int i = 0; i < 30; ++i) {
      auto got = reader->get("k" + std::to_string(i));
      REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
      CHECK(got->str() == "v" + std::to_string(i));
    }
  }
  auto s = clients[0]->status().value();
  int holders = 0;
  for (auto& m : s.members) holders += m.object_count > 0 ? 1 : 0;
  CHECK(holders >= 2);
  CHECK(s.object_count == 30);
}

TEST_CASE("kv: a dict put as bytes is read back in place with its tensor as a view") {
  auto cluster = start_cluster();
  auto kv = connect(*cluster);
  std::vector<float> logits(4 * 16);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.5f;
  sluice::dict_builder b;
  REQUIRE(b.add_int64("step", 7).ok());
  REQUIRE(b.add_tensor("logits", {sluice::dtype_float32, {4, 16}, {}, {}},
                       std::as_bytes(std::span{logits}))
              .ok());
  // encode_into wants a 64-byte-aligned region.
  std::vector<std::byte> storage(b.encoded_size() + 64);
  auto offset = (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
  std::span<std::byte> encoded{storage.data() + offset, b.encoded_size()};
  REQUIRE(b.encode_into(encoded).ok());
  REQUIRE(kv->put("dict", std::span<const std::byte>{encoded}).ok());

  auto got = kv->get("dict").value();
  auto dict = sluice::dict_view::parse(got.bytes());
  REQUIRE_MESSAGE(dict.ok(), (dict ? "" : dict.error().to_string()));
  CHECK(dict->find("step")->as_int64().value() == 7);
  auto tensor = dict->find("logits")->as_tensor().value();
  auto data = tensor.data;
  CHECK(data.data() >= got.data());
  CHECK(data.data() + data.size() <= got.data() + got.size());
  CHECK(std::memcmp(data.data(), logits.data(), data.size()) == 0);
}
