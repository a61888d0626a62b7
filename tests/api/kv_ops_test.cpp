// Conditional puts and removes, batches and listings through the public
// client API, against an in-process cluster.

#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/node.hpp"

namespace {

using sluice::errc;

struct fixture {
  std::unique_ptr<sluice::local_cluster> cluster;
  std::unique_ptr<sluice::client> kv;

  fixture() {
    auto c = sluice::local_cluster::start();
    REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
    cluster = std::move(*c);
    auto k = cluster->connect();
    REQUIRE_MESSAGE(k.ok(), (k ? "" : k.error().to_string()));
    kv = std::move(*k);
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "kv: a put only-if-absent stores once and leaves the first value in place") {
  sluice::put_options absent{.if_absent = true};
  auto v1 = kv->put("k", "first", absent);
  REQUIRE(v1.ok());
  auto again = kv->put("k", "second", absent);
  CHECK(again.code() == errc::conflict);
  CHECK(kv->get("k").value().str() == "first");
  CHECK(kv->get("k").value().version() == *v1);
  REQUIRE(kv->remove("k").value());
  CHECK(kv->put("k", "third", absent).ok());
  CHECK(kv->get("k").value().str() == "third");
}

TEST_CASE_FIXTURE(fixture, "kv: a put only-if-version is a compare-and-set") {
  auto v1 = kv->put("counter", "1").value();
  auto v2 = kv->put("counter", "2", sluice::put_options{.if_version = v1});
  REQUIRE(v2.ok());
  // A writer that read v1 and lost the race must not overwrite v2.
  auto stale = kv->put("counter", "2'", sluice::put_options{.if_version = v1});
  CHECK(stale.code() == errc::conflict);
  CHECK(kv->get("counter").value().str() == "2");
  CHECK(kv->put("missing", "x", sluice::put_options{.if_version = v1}).code() == errc::conflict);
  CHECK_FALSE(kv->exists("missing").value());
  CHECK(kv->put("k", "x", sluice::put_options{.if_absent = true, .if_version = 3}).code() ==
        errc::invalid_argument);
}

TEST_CASE_FIXTURE(fixture, "kv: racing only-if-absent puts: exactly one wins") {
  std::vector<std::thread> threads;
  std::vector<sluice::result<std::uint64_t>> results(8, sluice::result<std::uint64_t>{sluice::error{errc::internal, "unset"}});
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      results[i] = kv->put("lock", "holder " + std::to_string(i), sluice::put_options{.if_absent = true});
    });
  }
  for (auto& t : threads) t.join();
  int won = 0;
  std::string winner;
  for (int i = 0; i < 8; ++i) {
    if (results[i]) {
      ++won;
      winner = "holder " + std::to_string(i);
    } else {
      CHECK(results[i].code() == errc::conflict);
    }
  }
  CHECK(won == 1);
  CHECK(kv->get("lock").value().str() == winner);
}

TEST_CASE_FIXTURE(fixture, "kv: a conditional reservation is checked when it commits") {
  auto w = kv->reserve("r", 4, sluice::put_options{.if_absent = true});
  REQUIRE(w.ok());
  std::memcpy(w->bytes().data(), "abcd", 4);
  REQUIRE(kv->put("r", "sneaked in").ok());
  CHECK(w->commit().code() == errc::conflict);
  CHECK(kv->get("r").value().str() == "sneaked in");
}

TEST_CASE_FIXTURE(fixture, "kv: a remove only-if-version leaves a newer version alone") {
  auto v1 = kv->put("k", "a").value();
  auto v2 = kv->put("k", "b").value();
  CHECK(kv->remove("k", sluice::remove_options{.if_version = v1}).code() == errc::conflict);
  CHECK(kv->get("k").value().str() == "b");
  CHECK(kv->remove("k", sluice::remove_options{.if_version = v2}).value());
  CHECK_FALSE(kv->exists("k").value());
  CHECK(kv->remove("k", sluice::remove_options{.if_version = v2}).code() == errc::conflict);
}

TEST_CASE_FIXTURE(fixture, "kv: batches answer each key on its own") {
  REQUIRE(kv->put("a", "1").ok());
  REQUIRE(kv->put("c", "3").ok());
  std::vector<std::string_view> keys{"a", "b", "", "c"};
  auto found = kv->exists_batch(keys);
  REQUIRE(found.size() == 4);
  CHECK(found[0].value());
  CHECK_FALSE(found[1].value());
  CHECK(found[2].code() == errc::invalid_argument);  // an empty key is refused alone
  CHECK(found[3].value());
  auto removed = kv->remove_batch(keys);
  REQUIRE(removed.size() == 4);
  CHECK(removed[0].value());
  CHECK_FALSE(removed[1].value());
  CHECK(removed[2].code() == errc::invalid_argument);
  CHECK(removed[3].value());
  CHECK_FALSE(kv->exists("a").value());
  CHECK_FALSE(kv->exists("c").value());
}

TEST_CASE_FIXTURE(fixture, "kv: list pages through every key of a prefix exactly once, count agrees") {
  std::set<std::string> expected;
  for (int i = 0; i < 250; ++i) {
    auto key = "logs/" + std::to_string(i);
    REQUIRE(kv->put(key, std::string(static_cast<std::size_t>(i % 7), 'x')).ok());
    expected.insert(key);
  }
  REQUIRE(kv->put("logz", "not under logs/").ok());
  REQUIRE(kv->put("other", "y").ok());
  CHECK(kv->count("logs/").value() == 250);
  CHECK(kv->count("").value() == 252);
  CHECK(kv->count("nothing/").value() == 0);

  std::set<std::string> seen;
  sluice::list_options options{.limit = 64};
  int pages = 0;
  std::string last;
  while (true) {
    auto page = kv->list("logs/", options);
    REQUIRE(page.ok());
    ++pages;
    for (auto& k : page->keys) {
      CHECK(k.key > last);  // bytewise order across pages
      last = k.key;
      CHECK(seen.insert(k.key).second);
      CHECK(k.version > 0);
      CHECK(k.size == static_cast<std::uint64_t>(std::stoi(k.key.substr(5)) % 7));
    }
    if (!page->more) break;
    options.start_after = page->keys.back().key;
  }
  CHECK(pages == 4);
  CHECK(seen == expected);
  // A removed key no longer lists.
  REQUIRE(kv->remove("logs/42").value());
  CHECK(kv->count("logs/").value() == 249);
  auto all = kv->list("logs/4", sluice::list_options{.limit = 1000});
  REQUIRE(all.ok());
  for (auto& k : all->keys) CHECK(k.key != "logs/42");
  CHECK(kv->list(std::string(5000, 'p')).code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(fixture, "kv: a value with a TTL answers not_found once it expired, and only then") {
  using namespace std::chrono_literals;
  REQUIRE(kv->put("session/1", "token", sluice::put_options{.ttl = 400ms}).ok());
  REQUIRE(kv->put("session/2", "forever").ok());
  auto start = std::chrono::steady_clock::now();
  auto got = kv->get("session/1");
  if (std::chrono::steady_clock::now() - start < 300ms) {
    CHECK(got.value().str() == "token");
    CHECK(kv->count("session/").value() == 2);
  }
  std::this_thread::sleep_for(450ms);
  CHECK(kv->get("session/1").code() == errc::not_found);
  CHECK_FALSE(kv->exists("session/1").value());
  CHECK(kv->count("session/").value() == 1);
  CHECK(kv->get("session/2").value().str() == "forever");
  // Expired means absent: an only-if-absent put succeeds.
  CHECK(kv->put("session/1", "again", sluice::put_options{.if_absent = true}).ok());
  CHECK(kv->get("session/1").value().str() == "again");
  CHECK(kv->put("k", "x", sluice::put_options{.ttl = std::chrono::milliseconds{-1}}).code() == errc::invalid_argument);
}
