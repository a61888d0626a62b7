// The owner's fast path as plain code: its repeat filter and its bounds.

#include <doctest/doctest.h>

#include "actors/owner/fast_path.hpp"

#include <chrono>
#include <string_view>

namespace {

using sluice::fast_index;
using arrival = fast_index::arrival;

}  // namespace

TEST_CASE("fast path: a request delivered twice on a link is dropped the second time") {
  fast_index index;
  CHECK(index.first_time(7, 1, 10) == arrival::first);
  CHECK(index.first_time(7, 1, 10) == arrival::repeat);
  CHECK(index.first_time(7, 1, 11) == arrival::first);
  // Another sender, or the same id on another link, is another request.
  CHECK(index.first_time(7, 2, 10) == arrival::first);
  CHECK(index.first_time(8, 1, 10) == arrival::first);
  // Ids with the top bit set (an owner's relay) are counted apart.
  CHECK(index.first_time(7, 1, (1ULL << 63) | 10) == arrival::first);
}

TEST_CASE("fast path: a link that claims many senders keeps its repeat table within the bound") {
  fast_index index;
  constexpr auto bound = fast_index::windows_per_link_max;
  for (std::uint64_t sender = 1; sender <= bound; ++sender) {
    CHECK(index.first_time(7, sender, 1) == arrival::first);
  }
  // Past the bound a new sender is left to the owner actor, every time,
  // so all of its requests pass one filter: the endpoint's.
  for (std::uint64_t sender = bound + 1; sender <= 10 * bound; ++sender) {
    CHECK(index.first_time(7, sender, 1) == arrival::untracked);
    CHECK(index.first_time(7, sender, 1) == arrival::untracked);
  }
  // Senders tracked before are still filtered, and other links are not
  // affected.
  CHECK(index.first_time(7, 1, 1) == arrival::repeat);
  CHECK(index.first_time(7, 1, 2) == arrival::first);
  CHECK(index.first_time(9, bound + 1, 1) == arrival::first);
  // The link going down frees its windows.
  index.forget_link(7);
  CHECK(index.first_time(7, bound + 1, 1) == arrival::first);
}

TEST_CASE("fast path: a put that replaces a version drops it and says so in its report") {
  fast_index index;
  sluice::memory_store store{1 << 20};
  auto now = std::chrono::steady_clock::now();
  index.set_lease(now + std::chrono::hours{1});
  index.set_max_value_bytes(1 << 20);
  index.grant({sluice::slot_of("k")}, 1, 100, 10);
  auto first = index.try_put("k", sluice::shared_bytes::copy_of(std::string_view{"one"}), store, now);
  auto second = index.try_put("k", sluice::shared_bytes::copy_of(std::string_view{"two"}), store, now);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(second->version > first->version);
  // The version replaced is gone from the store: the master need not ask.
  CHECK_FALSE(store.get("k", first->version).has_value());
  CHECK(store.get("k", second->version).has_value());
  auto reports = index.take_unsent(16);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].commit.replaced == 0);
  CHECK(reports[1].commit.replaced == first->version);
}
