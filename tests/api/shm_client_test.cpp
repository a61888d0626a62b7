// Clients on the owner's host: shared memory instead of TCP.

#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <thread>

#include "sluice/client.hpp"
#include "sluice/node.hpp"

namespace {

using namespace std::chrono_literals;

std::unique_ptr<sluice::local_cluster> start_cluster() {
  auto c = sluice::local_cluster::start();
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

std::unique_ptr<sluice::client> connect(const std::string& address, sluice::client_transport t) {
  sluice::client_options options;
  options.transport = t;
  auto c = sluice::client::connect(address, options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

}  // namespace

TEST_CASE("shm client: a get returns a view into the owner's pool, shared by every reader of that version") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::shared_memory);
  std::string value(64 * 1024, 'v');
  REQUIRE(kv->put("k", value).ok());
  auto a = kv->get("k").value();
  auto b = kv->get("k").value();
  CHECK(a.str() == value);
  CHECK(a.data() == b.data());  // the same region, mapped once: no copies
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);

  // Over TCP every get is a copy of its own.
  auto remote = connect(cluster->client_address(), sluice::client_transport::tcp);
  auto c = remote->get("k").value();
  auto d = remote->get("k").value();
  CHECK(c.str() == value);
  CHECK(c.data() != d.data());
}

TEST_CASE("shm client: a view stays valid and unchanged while its key is overwritten and removed") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::shared_memory);
  REQUIRE(kv->put("k", std::string(4096, '1')).ok());
  auto old = kv->get("k").value();
  REQUIRE(kv->put("k", std::string(4096, '2')).ok());
  REQUIRE(kv->put("k", std::string(8192, '3')).ok());
  CHECK(old.str() == std::string(4096, '1'));
  CHECK(kv->get("k").value().str() == std::string(8192, '3'));
  REQUIRE(kv->remove("k").value());
  CHECK(old.str() == std::string(4096, '1'));
  CHECK(kv->get("k").code() == sluice::errc::not_found);
}

TEST_CASE("shm client: a held view keeps its version's memory, and releasing it gives the memory back") {
  sluice::local_cluster_options options;
  options.config_text = "[owner]\ncapacity = \"4MiB\"\n";
  auto cluster = sluice::local_cluster::start(options);
  REQUIRE(cluster.ok());
  auto kv = connect((*cluster)->client_address(), sluice::client_transport::shared_memory);
  std::string first(3 << 20, 'a'), second(3 << 20, 'b');
  REQUIRE(kv->put("k", first).ok());
  std::optional<sluice::value> view = kv->get("k").value();
  REQUIRE(kv->remove("k").value());
  // The removed version's memory is still read: no room for another.
  CHECK(kv->put("j", second).code() == sluice::errc::no_capacity);
  CHECK(view->str() == first);
  view.reset();
  // The release reaches the owner within a few milliseconds.
  sluice::result<std::uint64_t> put = sluice::error{sluice::errc::no_capacity, ""};
  for (int i = 0; i < 200 && !put; ++i) {
    put = kv->put("j", second);
    if (!put) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(put.ok());
  CHECK(kv->get("j").value().str() == second);
}

TEST_CASE("shm client: automatic transport finds the owner's socket and works without it") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::automatic);
  REQUIRE(kv->put("k", "auto").ok());
  auto a = kv->get("k").value();
  auto b = kv->get("k").value();
  CHECK(a.data() == b.data());  // it chose shared memory
  auto missing = sluice::client::connect("127.0.0.1:1", sluice::client_options{
      std::chrono::milliseconds{500}, std::chrono::milliseconds{500}, "t",
      sluice::client_transport::shared_memory});
  CHECK(missing.code() == sluice::errc::unavailable);
}
