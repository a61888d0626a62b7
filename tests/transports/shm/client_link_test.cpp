// The client's end of a shm channel (transports/shm/client_link.hpp), used
// directly as a calling thread's own channel uses it: the greeting and
// the pool's mapping (shared by every link of a process), frames written
// and read, payloads by reference read in place, leases given back.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "runtime/memory/pool.hpp"
#include "tests/transports/shm/shm_fixtures.hpp"
#include "tests/transports/test_sink.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/shm_server.hpp"
#include "transports/shm/waiter.hpp"

namespace {

using namespace sluice;
using namespace sluice::transport;
using namespace sluice::transport::testing;
using namespace std::chrono_literals;

/// The next record of `c`'s response ring as a frame, waiting up to `wait_max`.
result<wire::inbound_frame> next_frame(const std::shared_ptr<shm::client_link>& c) {
  auto until = std::chrono::steady_clock::now() + wait_max;
  while (std::chrono::steady_clock::now() < until) {
    auto record = c->responses->peek();
    if (!record) {
      std::this_thread::sleep_for(100us);
      continue;
    }
    auto frame = shm::take_record(c, *record, wire::frame_limits{});
    c->responses->pop();
    shm::notify_producer(*c->responses);
    return frame;
  }
  return fail(errc::timeout, "no record");
}

}  // namespace

TEST_CASE("shm client link: it greets with its hello, and the frames it writes reach the owner in order") {
  auto p = pool::create({"link-frames", 1u << 20, 1u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  recording_sink owner_sink;
  shm_server server{1, owner_sink, {}, rings_with_pool(**p)};
  auto name = unique_name("frames");
  REQUIRE(server.listen(name).ok());
  auto link = shm::open_client_link(name, make_frame(100));
  REQUIRE(link.ok());
  auto& c = **link;
  CHECK(c.up);
  REQUIRE(c.segments != nullptr);
  CHECK(c.segments->size() == 1);
  for (std::uint64_t i = 1; i <= 3; ++i) {
    std::lock_guard guard{c.send_mutex};
    REQUIRE(shm::write_locked(c, make_frame(i, patterned(100 * i, i))));
    shm::notify_poller(*c.requests, c.doorbell.get());
  }
  auto at_owner = owner_sink.wait_up();
  REQUIRE(at_owner.has_value());
  REQUIRE(owner_sink.wait_frames(*at_owner, 4));
  auto frames = owner_sink.frames(*at_owner);
  CHECK(sequence_of(frames[0]) == 100);  // the hello, first
  for (std::uint64_t i = 1; i <= 3; ++i) {
    CHECK(sequence_of(frames[i]) == i);
    CHECK(is_patterned(frames[i].payload, 100 * i, i));
  }
}

TEST_CASE("shm client link: a second link of the process takes the first one's mapping of the pool") {
  auto p = pool::create({"link-mapped", 1u << 20, 1u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  auto r = (*p)->allocate(4096);
  REQUIRE(r.ok());
  std::memset((*p)->resolve(*r)->data(), 0x5a, 4096);
  recording_sink owner_sink;
  shm_server server{1, owner_sink, {}, rings_with_pool(**p)};
  auto name = unique_name("mapped");
  REQUIRE(server.listen(name).ok());
  auto first = shm::open_client_link(name, make_frame(1));
  REQUIRE(first.ok());
  auto second = shm::open_client_link(name, make_frame(2), (*first)->segments);
  REQUIRE(second.ok());
  // One mapping, so a region has one address in this process.
  CHECK((*second)->segments == (*first)->segments);
  auto a = shm::resolve_in(**first, *r);
  auto b = shm::resolve_in(**second, *r);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->data() == b->data());
  CHECK(std::to_integer<int>((*a)[4095]) == 0x5a);  // what the owner wrote
  // A region outside every segment resolves to nothing.
  CHECK_FALSE(shm::resolve_in(**first, region{0, (1u << 20) - 100, 4096}).has_value());
  CHECK_FALSE(shm::resolve_in(**first, region{7, 0, 16}).has_value());
}

TEST_CASE("shm client link: a payload by reference is read in place, and its lease goes back once flushed") {
  auto p = pool::create({"link-lease", 1u << 20, 1u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  auto r = (*p)->allocate(64 * 1024);
  REQUIRE(r.ok());
  auto bytes = (*p)->resolve(*r).value();
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i % 251);
  std::atomic<int> released{0};
  recording_sink owner_sink;
  shm_server server{1, owner_sink, {}, rings_with_pool(**p)};
  auto name = unique_name("lease");
  REQUIRE(server.listen(name).ok());
  auto link = shm::open_client_link(name, make_frame(1));
  REQUIRE(link.ok());
  auto at_owner = owner_sink.wait_up();
  REQUIRE(at_owner.has_value());
  REQUIRE(server.send(*at_owner, make_frame(9, counted(bytes, released))).ok());
  {
    auto frame = next_frame(*link);
    REQUIRE(frame.ok());
    CHECK(sequence_of(*frame) == 9);
    // In place: this process's mapping of the region, not a copy.
    CHECK(frame->payload.data() == shm::resolve_in(**link, *r)->data());
    CHECK(std::memcmp(frame->payload.data(), bytes.data(), bytes.size()) == 0);
    std::lock_guard guard{(*link)->send_mutex};
    CHECK((*link)->releases.empty());  // held: nothing to give back yet
  }
  // The view went: its lease waits to be told, then the owner lets go.
  {
    std::lock_guard guard{(*link)->send_mutex};
    CHECK((*link)->releases.size() == 1);
  }
  CHECK(released == 0);
  shm::flush_releases(**link);
  {
    std::lock_guard guard{(*link)->send_mutex};
    CHECK((*link)->releases.empty());
  }
  auto until = std::chrono::steady_clock::now() + wait_max;
  while (released == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(released == 1);
}
