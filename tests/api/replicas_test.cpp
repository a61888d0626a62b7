// Puts with several copies through the public client API, against a
// master and owners in this process: a put succeeds only with the copies
// it asked for, or with at least min_replicas of them, and says how many.

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/node.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;

struct cluster {
  std::unique_ptr<sluice::node> master;
  std::vector<std::unique_ptr<sluice::node>> owners;
  std::unique_ptr<sluice::client> kv;

  explicit cluster(int owner_count) {
    sluice::node_options master_options;
    master_options.listen = "127.0.0.1:0";
    auto m = sluice::node::start_master(master_options);
    REQUIRE_MESSAGE(m.ok(), (m ? "" : m.error().to_string()));
    master = std::move(*m);
    for (int i = 0; i < owner_count; ++i) {
      sluice::node_options owner_options;
      owner_options.listen = "127.0.0.1:0";
      owner_options.master = master->address();
      auto o = sluice::node::start_owner(owner_options);
      REQUIRE_MESSAGE(o.ok(), (o ? "" : o.error().to_string()));
      owners.push_back(std::move(*o));
    }
    auto c = sluice::client::connect(owners.front()->address());
    REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
    kv = std::move(*c);
    await([&](const sluice::cluster_status& s) {
      std::size_t up = 0;
      for (auto& member : s.members) up += member.up ? 1 : 0;
      return up == owners.size();
    });
  }

  ~cluster() {
    kv.reset();
    owners.clear();  // before the master, so it never reports them failed
  }

  /// Polls status until `pred` holds (or 10 s pass).
  template <class Pred>
  sluice::cluster_status await(Pred pred) {
    auto give_up = std::chrono::steady_clock::now() + 10s;
    while (true) {
      auto s = kv->status();
      if (s && pred(*s)) return *s;
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "status never reached the expected state");
      std::this_thread::sleep_for(20ms);
    }
  }
};

std::uint64_t under_replicated(const sluice::cluster_status& s) {
  std::uint64_t n = 0;
  for (auto& m : s.members) n += m.under_replicated_puts;
  return n;
}

}  // namespace

TEST_CASE("replicas: a put of two copies with one owner up fails with unavailable and stores nothing") {
  cluster c{1};
  auto put = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 2});
  REQUIRE_FALSE(put.ok());
  CHECK(put.code() == errc::unavailable);
  CHECK(put.error().message().find("2 copies asked") != std::string::npos);
  CHECK(c.kv->get("k").code() == errc::not_found);
  // The plain put answers the same.
  CHECK(c.kv->put("k", "v", sluice::put_options{.replicas = 2}).code() == errc::unavailable);
}

TEST_CASE("replicas: with min_replicas 1 a put of two copies with one owner up succeeds and reports one copy") {
  cluster c{1};
  auto put = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 2, .min_replicas = 1});
  REQUIRE_MESSAGE(put.ok(), (put ? "" : put.error().to_string()));
  CHECK(put->copies == 1);
  CHECK(put->version > 0);
  CHECK(c.kv->get("k").value().str() == "v");
  // The owner counts the put as under-replicated, and its heartbeat tells
  // the master.
  c.await([](const sluice::cluster_status& s) { return under_replicated(s) == 1; });
}

TEST_CASE("replicas: a put of two copies on two owners reports two copies") {
  cluster c{2};
  auto put = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 2});
  REQUIRE_MESSAGE(put.ok(), (put ? "" : put.error().to_string()));
  CHECK(put->copies == 2);
  auto relaxed = c.kv->put_with_copies("j", "w", sluice::put_options{.replicas = 2, .min_replicas = 1});
  REQUIRE(relaxed.ok());
  CHECK(relaxed->copies == 2);  // min_replicas never makes fewer when more can be had
  // A put of one copy says one.
  CHECK(c.kv->put_with_copies("one", "x", sluice::put_options{}).value().copies == 1);
  auto s = c.await([](const sluice::cluster_status& s) {
    std::uint64_t objects = 0;
    for (auto& m : s.members) objects += m.object_count;
    return objects == 5;
  });
  CHECK(under_replicated(s) == 0);
}

TEST_CASE("replicas: three copies asked, at least two, on two owners: two copies") {
  cluster c{2};
  auto put = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 3, .min_replicas = 2});
  REQUIRE_MESSAGE(put.ok(), (put ? "" : put.error().to_string()));
  CHECK(put->copies == 2);
  auto strict = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 3, .min_replicas = 3});
  CHECK(strict.code() == errc::unavailable);
  CHECK(strict.error().message().find("3 copies asked, but only 2") != std::string::npos);
  CHECK(c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 4, .min_replicas = 3}).code() ==
        errc::unavailable);
}

TEST_CASE("replicas: min_replicas above replicas is refused with invalid_argument") {
  cluster c{1};
  auto put = c.kv->put_with_copies("k", "v", sluice::put_options{.replicas = 2, .min_replicas = 3});
  CHECK(put.code() == errc::invalid_argument);
  CHECK(put.error().message().find("min_replicas") != std::string::npos);
  CHECK(c.kv->reserve("k", 8, sluice::put_options{.replicas = 1, .min_replicas = 2}).code() == errc::invalid_argument);
}
