// Clients on the owner's host: shared memory instead of TCP.

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <thread>

#include "sluice/client.hpp"
#include "sluice/dict.hpp"
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

TEST_CASE("shm client: a value written in place through a reservation is read back as that same memory") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::shared_memory);
  auto w = kv->reserve("tensor", 1 << 20);
  REQUIRE(w.ok());
  auto bytes = w->bytes();
  REQUIRE(bytes.size() == (1u << 20));
  CHECK(reinterpret_cast<std::uintptr_t>(bytes.data()) % 64 == 0);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7);
  const std::byte* written = bytes.data();
  auto version = w->commit();
  REQUIRE(version.ok());
  auto got = kv->get("tensor").value();
  CHECK(got.version() == *version);
  CHECK(got.data() == written);  // written once, read in place: no copy anywhere
  CHECK(w->commit().code() == sluice::errc::invalid_argument);
}

TEST_CASE("shm client: an aborted or dropped reservation gives its memory back") {
  sluice::local_cluster_options options;
  options.config_text = "[owner]\ncapacity = \"4MiB\"\n";
  auto cluster = sluice::local_cluster::start(options);
  REQUIRE(cluster.ok());
  auto kv = connect((*cluster)->client_address(), sluice::client_transport::shared_memory);
  for (int i = 0; i < 10; ++i) {
    auto w = kv->reserve("k", 3 << 20);
    REQUIRE_MESSAGE(w.ok(), "round " << i << ": " << (w ? "" : w.error().to_string()));
    if (i % 2 == 0) w->abort();  // else the destructor gives it back
  }
  CHECK(kv->put("k", std::string(3 << 20, 'z')).ok());
}

TEST_CASE("shm client: reserving more than the owner accepts fails like a put would") {
  sluice::local_cluster_options options;
  options.config_text = "[owner]\ncapacity = \"4MiB\"\nmax_value = \"1MiB\"\n";
  auto cluster = sluice::local_cluster::start(options);
  REQUIRE(cluster.ok());
  auto kv = connect((*cluster)->client_address(), sluice::client_transport::shared_memory);
  CHECK(kv->reserve("k", 2 << 20).code() == sluice::errc::invalid_argument);
  CHECK(kv->reserve("", 10).code() == sluice::errc::invalid_argument);
  // A put of a value over max_value says so too, rather than overflowing
  // the ring it would otherwise be sent on.
  auto too_big = kv->put("k", std::string(2 << 20, 'x'));
  CHECK(too_big.code() == sluice::errc::invalid_argument);
  CHECK_FALSE(kv->exists("k").value());
  std::vector<sluice::writable_value> held;
  sluice::errc last = sluice::errc::ok;
  for (int i = 0; i < 8 && last == sluice::errc::ok; ++i) {
    auto w = kv->reserve("k" + std::to_string(i), 1 << 20);
    last = w.code();
    if (w) held.push_back(std::move(*w));
  }
  CHECK(last == sluice::errc::no_capacity);
  CHECK(kv->put("one-more", std::string(1 << 20, 'y')).code() == sluice::errc::no_capacity);
}

TEST_CASE("shm client: a value a thread read and dropped lets go of its lease though the thread calls no more") {
  sluice::local_cluster_options options;
  options.config_text = "[owner]\ncapacity = \"4MiB\"\nmax_value = \"3MiB\"\neviction = \"none\"\n";
  auto cluster = sluice::local_cluster::start(options);
  REQUIRE(cluster.ok());
  auto kv = connect((*cluster)->client_address(), sluice::client_transport::shared_memory);
  REQUIRE(kv->put("a", std::string(3 << 20, 'a')).ok());
  std::promise<void> read;
  std::promise<void> done;
  // The reader gets the value on its own channel, drops it, and then
  // stays alive without another call that would carry the release.
  std::thread reader([&] {
    {
      auto v = kv->get("a");
      CHECK(v.ok());
      if (v) CHECK(v->size() == std::size_t{3} << 20);
    }
    read.set_value();
    done.get_future().wait();
  });
  read.get_future().wait();
  REQUIRE(kv->remove("a").value());
  // The 3 MiB come back once the owner learns the lease went.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  sluice::result<sluice::writable_value> room = sluice::error{sluice::errc::internal, "not tried"};
  do {
    room = kv->reserve("b", 3 << 20);
    if (!room) std::this_thread::sleep_for(std::chrono::milliseconds{5});
  } while (!room && std::chrono::steady_clock::now() < deadline);
  CHECK_MESSAGE(room.ok(), (room ? "" : room.error().to_string()));
  done.set_value();
  reader.join();
}

TEST_CASE("tcp client: a reservation is a local buffer sent at commit") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::tcp);
  auto w = kv->reserve("k", 100);
  REQUIRE(w.ok());
  std::memset(w->bytes().data(), 'q', 100);
  REQUIRE(w->commit().ok());
  CHECK(kv->get("k").value().str() == std::string(100, 'q'));
}

TEST_CASE("shm client: a dict goes straight into the pool and its tensor is read in place") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::shared_memory);
  std::vector<float> logits(8 * 1000);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i);
  std::string header = "header-bytes";
  std::vector<std::byte> body(5000, std::byte{7});
  sluice::dict_builder b;
  REQUIRE(b.add_int64("step", 42).ok());
  REQUIRE(b.add_bytes("message", {std::as_bytes(std::span{header}), std::span<const std::byte>{body}}).ok());
  REQUIRE(b.add_tensor("logits", {sluice::dtype_float32, {8, 1000}, {}, {}}, std::as_bytes(std::span{logits}))
              .ok());
  REQUIRE(kv->put("d", b).ok());
  auto v = kv->get("d").value();
  auto again = kv->get("d").value();
  CHECK(v.data() == again.data());
  auto d = sluice::dict_view::parse(v.bytes());
  REQUIRE(d.ok());
  CHECK(d->find("step")->as_int64().value() == 42);
  auto message = d->find("message")->as_bytes().value();
  CHECK(message.size() == header.size() + body.size());
  CHECK(std::memcmp(message.data(), header.data(), header.size()) == 0);
  auto t = d->find("logits")->as_tensor().value();
  CHECK(t.data.data() >= v.data());
  CHECK(std::memcmp(t.data.data(), logits.data(), t.data.size()) == 0);
}

TEST_CASE("kv: batches put and get many keys with a result each") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::automatic);
  std::vector<std::string> values;
  std::vector<std::pair<std::string_view, std::span<const std::byte>>> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) {
    keys.push_back("batch/" + std::to_string(i));
    values.push_back(std::string(static_cast<std::size_t>(i * 100), static_cast<char>('a' + i % 26)));
  }
  for (int i = 0; i < 50; ++i) items.emplace_back(keys[static_cast<std::size_t>(i)], std::as_bytes(std::span{values[static_cast<std::size_t>(i)]}));
  items.emplace_back("", std::span<const std::byte>{});  // one bad item
  auto put = kv->put_batch(items);
  REQUIRE(put.size() == 51);
  for (int i = 0; i < 50; ++i) CHECK(put[static_cast<std::size_t>(i)].ok());
  CHECK(put[50].code() == sluice::errc::invalid_argument);
  std::vector<std::string_view> wanted(keys.begin(), keys.end());
  wanted.push_back("batch/missing");
  auto got = kv->get_batch(wanted);
  REQUIRE(got.size() == 51);
  for (int i = 0; i < 50; ++i) CHECK(got[static_cast<std::size_t>(i)].value().str() == values[static_cast<std::size_t>(i)]);
  CHECK(got[50].code() == sluice::errc::not_found);
}

TEST_CASE("kv: get_into copies into the caller's buffer and says when it is too small") {
  auto cluster = start_cluster();
  for (auto t : {sluice::client_transport::shared_memory, sluice::client_transport::tcp}) {
    auto kv = connect(cluster->client_address(), t);
    REQUIRE(kv->put("k", "twelve bytes").ok());
    std::vector<std::byte> out(64);
    auto n = kv->get_into("k", out);
    REQUIRE(n.ok());
    CHECK(*n == 12);
    CHECK(std::memcmp(out.data(), "twelve bytes", 12) == 0);
    std::vector<std::byte> small(4);
    CHECK(kv->get_into("k", small).code() == sluice::errc::invalid_argument);
    CHECK(kv->get_into("missing", out).code() == sluice::errc::not_found);
  }
}

TEST_CASE("shm client: a large put from a buffer lands in the pool and reads back whole") {
  auto cluster = start_cluster();
  auto kv = connect(cluster->client_address(), sluice::client_transport::shared_memory);
  std::string big(3 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13);
  REQUIRE(kv->put("big", big).ok());
  CHECK(kv->get("big").value().str() == big);
}
