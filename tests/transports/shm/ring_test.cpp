#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "runtime/rng.hpp"
#include "transports/shm/ring.hpp"
#include "transports/shm/waiter.hpp"

namespace sluice::transport::shm {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t page_bytes = 4096;

// A memfd mapped MAP_SHARED, as the two processes of a channel map it,
// followed by a PROT_NONE guard page: a read past the end faults.
class shared_area {
 public:
  explicit shared_area(std::size_t bytes) : bytes_((bytes + page_bytes - 1) / page_bytes * page_bytes) {
    fd_ = ::memfd_create("sluice-ring-test", MFD_CLOEXEC);
    REQUIRE(fd_ >= 0);
    REQUIRE(::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0);
    void* reserved = ::mmap(nullptr, bytes_ + page_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(reserved != MAP_FAILED);
    void* mapped = ::mmap(reserved, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, 0);
    REQUIRE(mapped == reserved);
    base_ = static_cast<std::byte*>(mapped);
  }
  shared_area(const shared_area&) = delete;
  shared_area& operator=(const shared_area&) = delete;
  ~shared_area() {
    ::munmap(base_, bytes_ + page_bytes);
    ::close(fd_);
  }

  std::span<std::byte> all() const { return {base_, bytes_}; }
  /// The last `bytes` of the mapping, 128-byte aligned, ending at the guard.
  std::span<std::byte> tail(std::size_t bytes) const {
    REQUIRE(bytes % ring_line_bytes == 0);
    return {base_ + bytes_ - bytes, bytes};
  }

 private:
  std::size_t bytes_;
  int fd_ = -1;
  std::byte* base_ = nullptr;
};

std::vector<std::byte> pattern(std::size_t length, std::uint64_t seed) {
  std::vector<std::byte> out(length);
  for (std::size_t i = 0; i < length; ++i) out[i] = static_cast<std::byte>((seed * 131 + i * 7) & 0xff);
  return out;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

template <class T>
void poke(std::span<std::byte> area, std::size_t offset, T value) {
  std::memcpy(area.data() + offset, &value, sizeof value);
}

// Runs `body` in a child process; its return value is the exit code.
template <class Body>
pid_t spawn(Body body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body());  // no doctest, no atexit handlers in the child
  return pid;
}

int exit_code_of(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Bounded wait until the peer announces it sleeps on `word`.
bool wait_until_sleeping(const std::atomic<std::uint32_t>& word) {
  const auto deadline = clock_type::now() + 5s;
  while (word.load() != ring_sleeping) {
    if (clock_type::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

constexpr std::uint32_t small_capacity_bytes = 4096;

TEST_CASE("shm ring: a pushed record pops back with the same bytes") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto producer = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(producer.ok());
  auto consumer = ring::attach(area.all());
  REQUIRE(consumer.ok());
  CHECK(!consumer->peek());

  const auto hello = pattern(13, 1);
  CHECK(producer->try_push(hello));
  CHECK(producer->try_push(std::span<const std::byte>{}));  // an empty record is a record
  auto first = consumer->peek();
  REQUIRE(first);
  CHECK(same(*first, hello));
  CHECK(same(*consumer->peek(), hello));  // peeking again does not consume
  consumer->pop();
  auto second = consumer->peek();
  REQUIRE(second);
  CHECK(second->empty());
  consumer->pop();
  CHECK(!consumer->peek());
  CHECK(!consumer->broken());
}

TEST_CASE("shm ring: records of many sizes wrap around and match a model") {
  const std::uint64_t seed = 20240611;
  INFO("seed " << seed);
  rng random{seed};
  constexpr std::uint32_t capacity_bytes = 16384;
  shared_area area{ring_area_bytes(capacity_bytes)};
  auto producer = ring::format(area.all(), capacity_bytes);
  REQUIRE(producer.ok());
  auto consumer = ring::attach(area.all());
  REQUIRE(consumer.ok());

  std::deque<std::vector<std::byte>> model;
  std::uint64_t bytes_pushed = 0;
  for (std::uint64_t step = 0; step < 40'000; ++step) {
    if (random.chance(1, 2)) {
      const bool big = random.chance(1, 16);
      const auto length = random.uniform(big ? producer->record_bytes_max() + 1 : 200);
      auto record = pattern(length, step);
      if (producer->try_push(record)) {
        bytes_pushed += length;
        model.push_back(std::move(record));
      } else {
        CHECK(!model.empty());  // only a non-empty ring may lack room
      }
    } else {
      auto got = consumer->peek();
      REQUIRE(got.has_value() == !model.empty());
      if (!got) continue;
      REQUIRE(same(*got, model.front()));
      consumer->pop();
      model.pop_front();
    }
  }
  CHECK(!producer->broken());
  CHECK(!consumer->broken());
  CHECK(bytes_pushed > 20 * capacity_bytes);  // wrapped around many times
}

TEST_CASE("shm ring: a full ring refuses a push until the consumer pops") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());
  const auto record = pattern(100, 7);  // 112 bytes with header and padding
  int pushed = 0;
  while (r->try_push(record)) ++pushed;
  CHECK(pushed == small_capacity_bytes / 112);
  CHECK(!r->writable(100));
  CHECK(!r->reserve(100));
  CHECK(!r->broken());
  REQUIRE(r->peek());
  r->pop();
  CHECK(r->writable(100));
  CHECK(r->try_push(record));
}

TEST_CASE("shm ring: a record built in place with reserve and commit is read back") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());

  auto room = r->reserve(64);
  REQUIRE(room);
  CHECK(room->size() == 64);
  std::memset(room->data(), 0xab, room->size());
  CHECK(!r->peek());  // invisible until commit
  r->commit();
  auto got = r->peek();
  REQUIRE(got);
  CHECK(same(*got, std::vector<std::byte>(64, std::byte{0xab})));
  r->pop();

  // A second reserve replaces the first; a shorter commit publishes a prefix.
  REQUIRE(r->reserve(10));
  room = r->reserve(300);
  REQUIRE(room);
  std::memset(room->data(), 0x11, 40);
  r->commit(40);
  got = r->peek();
  REQUIRE(got);
  CHECK(same(*got, std::vector<std::byte>(40, std::byte{0x11})));
  r->pop();
  CHECK(!r->peek());
}

TEST_CASE("shm ring: a record longer than the bound is refused and the ring stays usable") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());
  CHECK(r->record_bytes_max() == small_capacity_bytes / 2 - ring_record_header_bytes);
  CHECK(!r->reserve(r->record_bytes_max() + 1));
  CHECK(!r->try_push(pattern(r->record_bytes_max() + 1, 0)));
  CHECK(!r->broken());
  CHECK(r->try_push(pattern(r->record_bytes_max(), 0)));
}

TEST_CASE("shm ring: format and attach refuse bad areas and garbage headers") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto bytes = area.all();
  CHECK(ring::format(bytes, 5000).code() == errc::invalid_argument);       // not a power of two
  CHECK(ring::format(bytes, 2048).code() == errc::invalid_argument);       // below the minimum
  CHECK(ring::format(bytes, 1u << 31).code() == errc::invalid_argument);   // above the maximum
  CHECK(ring::format(bytes.subspan(8), small_capacity_bytes).code() == errc::invalid_argument);
  CHECK(ring::format(bytes.first(ring_header_bytes), small_capacity_bytes).code() == errc::invalid_argument);

  CHECK(ring::attach(bytes).code() == errc::protocol);  // all zeros: no magic
  auto reformat = [&] { REQUIRE(ring::format(bytes, small_capacity_bytes).ok()); };
  reformat();
  CHECK(ring::attach(bytes.first(ring_header_bytes + 100)).code() == errc::protocol);  // capacity past the area
  poke<std::uint32_t>(bytes, 8, ring_version + 1);
  CHECK(ring::attach(bytes).code() == errc::protocol);
  reformat();
  poke<std::uint32_t>(bytes, 12, 4097);  // capacity not a power of two
  CHECK(ring::attach(bytes).code() == errc::protocol);
  reformat();
  poke<std::uint32_t>(bytes, 12, 1u << 31);
  CHECK(ring::attach(bytes).code() == errc::protocol);
  reformat();
  poke<std::uint64_t>(bytes, 1 * ring_line_bytes, 2 * small_capacity_bytes);  // writer a lap ahead
  CHECK(ring::attach(bytes).code() == errc::protocol);
  reformat();
  poke<std::uint64_t>(bytes, 2 * ring_line_bytes, 8);  // reader ahead of the writer
  CHECK(ring::attach(bytes).code() == errc::protocol);
  reformat();
  poke<std::uint64_t>(bytes, 1 * ring_line_bytes, 12);  // misaligned position
  CHECK(ring::attach(bytes).code() == errc::protocol);
}

TEST_CASE("shm ring: a corrupted position or record header breaks the ring cleanly") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto bytes = area.all();
  const std::size_t data = ring_header_bytes;
  const std::size_t write_at = 1 * ring_line_bytes;
  const std::size_t read_at = 2 * ring_line_bytes;

  auto fresh = [&](std::uint32_t length) {
    auto producer = ring::format(bytes, small_capacity_bytes);
    REQUIRE(producer.ok());
    REQUIRE(producer->try_push(pattern(length, 3)));
    auto consumer = ring::attach(bytes);
    REQUIRE(consumer.ok());
    return std::pair{std::move(*producer), std::move(*consumer)};
  };

  SUBCASE("the producer position jumps far ahead") {
    auto [producer, consumer] = fresh(16);
    REQUIRE(consumer.peek());  // the record below the validated position is still served
    consumer.pop();
    poke<std::uint64_t>(bytes, write_at, std::uint64_t{1} << 40);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("the producer position moves backwards") {
    auto [producer, consumer] = fresh(16);
    REQUIRE(consumer.peek());
    consumer.pop();
    poke<std::uint64_t>(bytes, write_at, 0);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("a record claims more bytes than were committed") {
    auto [producer, consumer] = fresh(16);
    poke<std::uint32_t>(bytes, data, 1000);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("a record claims to run past the end of the area") {
    auto [producer, consumer] = fresh(16);
    poke<std::uint32_t>(bytes, data, 0xffff'fff0);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("a record header carries an unknown tag") {
    auto [producer, consumer] = fresh(16);
    poke<std::uint32_t>(bytes, data + 4, 0xdead'beef);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("a pad at offset 0 or of the wrong length") {
    auto [producer, consumer] = fresh(16);
    poke<std::uint32_t>(bytes, data + 4, ring_pad_tag);
    CHECK(!consumer.peek());
    CHECK(consumer.broken());
  }
  SUBCASE("the consumer position runs past what was produced") {
    auto [producer, consumer] = fresh(16);
    poke<std::uint64_t>(bytes, read_at, 4096);
    // Push until the cached room runs out and the producer re-reads the position.
    for (int i = 0; i < 100 && producer.try_push(pattern(100, 1)); ++i) {
    }
    CHECK(producer.broken());
    CHECK(!producer.try_push(pattern(1, 1)));  // stays broken
  }
}

TEST_CASE("shm ring: random garbage in the shared area never makes a handle read outside it") {
  const std::uint64_t seed = 77;
  INFO("seed " << seed);
  rng random{seed};
  // The area ends at a guard page: reading past the data area faults.
  shared_area mapping{2 * page_bytes};
  auto bytes = mapping.tail(ring_area_bytes(small_capacity_bytes));
  const std::byte* data_begin = bytes.data() + ring_header_bytes;
  const std::byte* data_end = bytes.data() + bytes.size();
  int broken = 0;
  for (int round = 0; round < 2000; ++round) {
    auto producer = ring::format(bytes, small_capacity_bytes);
    REQUIRE(producer.ok());
    for (int i = 0, n = static_cast<int>(random.uniform(40)); i < n; ++i) {
      (void)producer->try_push(pattern(random.uniform(300), static_cast<std::uint64_t>(i)));
    }
    for (int i = 0, n = 1 + static_cast<int>(random.uniform(4)); i < n; ++i) {
      // Scribble on a position (low bits or all of it) or on the data area.
      const bool position = random.chance(1, 2);
      const std::size_t at = position ? (1 + random.uniform(2)) * ring_line_bytes
                                      : ring_header_bytes + random.uniform(small_capacity_bytes - 8);
      poke<std::uint64_t>(bytes, at, random.chance(1, 2) ? random.next() : random.uniform(2 * small_capacity_bytes));
    }
    auto consumer = ring::attach(bytes);
    if (!consumer) continue;
    for (int i = 0; i < 64; ++i) {
      auto got = consumer->peek();
      if (!got) break;
      REQUIRE(got->data() >= data_begin);
      REQUIRE(got->data() + got->size() <= data_end);
      consumer->pop();
    }
    auto room = producer->reserve(static_cast<std::uint32_t>(random.uniform(producer->record_bytes_max())));
    if (room) {
      REQUIRE(room->data() >= data_begin);
      REQUIRE(room->data() + room->size() <= data_end);
    }
    broken += consumer->broken() || producer->broken();
  }
  CHECK(broken > 0);  // the garbage was noticed at least sometimes
}

TEST_CASE("shm ring: a waiting consumer drains a closed ring before it reports closed") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());
  REQUIRE(r->try_push(pattern(5, 5)));
  close_and_wake(*r);
  CHECK(r->closed());
  waiter w;
  const auto deadline = clock_type::now() + 1s;
  CHECK(w.wait_readable(*r, deadline) == wait_result::ready);
  r->pop();
  CHECK(w.wait_readable(*r, deadline) == wait_result::closed);
  CHECK(w.wait_writable(*r, 8, deadline) == wait_result::closed);
}

TEST_CASE("shm ring: a wait on an empty ring ends at its deadline") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());
  waiter w{waiter_config{std::chrono::microseconds{5}, std::chrono::microseconds{500}}};
  CHECK(w.wait_readable(*r, clock_type::now() + 3ms) == wait_result::timed_out);
  CHECK(r->consumer_wake_word().load() == ring_awake);  // a timed-out sleeper leaves no flag behind
}

TEST_CASE("shm ring: a producer sleeping for room is woken by the consumer's pop") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto producer = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(producer.ok());
  auto consumer = ring::attach(area.all());
  REQUIRE(consumer.ok());
  while (producer->try_push(pattern(200, 1))) {
  }
  // A nap longer than the deadline: only a real wake-up ends the wait in time.
  waiter w{waiter_config{std::chrono::microseconds{1}, std::chrono::microseconds{10'000'000}}};
  wait_result outcome = wait_result::timed_out;
  std::thread blocked{[&] { outcome = w.wait_writable(*producer, 200, clock_type::now() + 5s); }};
  REQUIRE(wait_until_sleeping(consumer->producer_wake_word()));
  REQUIRE(consumer->peek());
  consumer->pop();
  CHECK(notify_producer(*consumer));
  blocked.join();
  CHECK(outcome == wait_result::ready);
  CHECK(w.stats().ready_after_sleep == 1);
}

TEST_CASE("shm ring: closing the ring wakes a consumer sleeping in another process") {
  shared_area area{ring_area_bytes(small_capacity_bytes)};
  auto r = ring::format(area.all(), small_capacity_bytes);
  REQUIRE(r.ok());
  const pid_t child = spawn([&] {
    auto mine = ring::attach(area.all());
    if (!mine) return 1;
    waiter w{waiter_config{std::chrono::microseconds{1}, std::chrono::microseconds{10'000'000}}};
    const auto outcome = w.wait_readable(*mine, clock_type::now() + 5s);
    return outcome == wait_result::closed ? 0 : 10 + static_cast<int>(outcome);
  });
  REQUIRE(wait_until_sleeping(r->consumer_wake_word()));
  close_and_wake(*r);
  CHECK(exit_code_of(child) == 0);
}

// Ping-pong between two processes through two rings in one memfd: the
// parent sends, the child echoes. Every `sleep_every` messages the parent
// waits until the child sleeps before it sends, so both the spinning and
// the sleeping paths carry traffic.
struct ping_pong_report {
  waiter_stats child_stats;
  std::uint64_t child_messages = 0;
};

int echo_loop(std::span<std::byte> requests_area, std::span<std::byte> responses_area,
              ping_pong_report& report, std::uint64_t messages) {
  auto requests = ring::attach(requests_area);
  auto responses = ring::attach(responses_area);
  if (!requests || !responses) return 1;
  waiter w{waiter_config{std::chrono::microseconds{20}, std::chrono::microseconds{10'000}}};
  for (std::uint64_t i = 0; i < messages; ++i) {
    if (w.wait_readable(*requests, clock_type::now() + 5s) != wait_result::ready) return 2;
    auto request = requests->peek();
    if (!request || !same(*request, pattern(request->size(), i))) return 3;
    if (w.wait_writable(*responses, static_cast<std::uint32_t>(request->size()), clock_type::now() + 5s) !=
        wait_result::ready) {
      return 4;
    }
    if (!responses->try_push(*request)) return 5;
    requests->pop();
    notify_consumer(*responses);
    notify_producer(*requests);
  }
  report.child_stats = w.stats();
  report.child_messages = messages;
  return 0;
}

TEST_CASE("shm ring: two processes ping-pong 20k messages through two rings with the waiter") {
  constexpr std::uint32_t capacity_bytes = 65536;
  constexpr std::uint64_t messages = 20'000;
  constexpr std::uint64_t sleep_every = 2'000;
  const std::size_t ring_bytes = ring_area_bytes(capacity_bytes);
  shared_area area{2 * ring_bytes + page_bytes};
  auto requests_area = area.all().subspan(0, ring_bytes);
  auto responses_area = area.all().subspan(ring_bytes, ring_bytes);
  auto* report = new (area.all().data() + 2 * ring_bytes) ping_pong_report{};
  auto requests = ring::format(requests_area, capacity_bytes);
  auto responses = ring::format(responses_area, capacity_bytes);
  REQUIRE(requests.ok());
  REQUIRE(responses.ok());

  const pid_t child = spawn([&] { return echo_loop(requests_area, responses_area, *report, messages); });
  waiter w;
  std::uint64_t mismatches = 0;
  std::uint64_t slept_sends = 0;
  for (std::uint64_t i = 0; i < messages; ++i) {
    if (i % sleep_every == 0 && wait_until_sleeping(requests->consumer_wake_word())) ++slept_sends;
    const auto payload = pattern(8 + i % 248, i);
    REQUIRE(requests->try_push(payload));  // one in flight: there is always room
    notify_consumer(*requests);
    REQUIRE(w.wait_readable(*responses, clock_type::now() + 5s) == wait_result::ready);
    mismatches += !same(*responses->peek(), payload);
    responses->pop();
  }
  REQUIRE(exit_code_of(child) == 0);
  CHECK(mismatches == 0);
  CHECK(report->child_messages == messages);
  CHECK(slept_sends == messages / sleep_every);
  CHECK(report->child_stats.ready_after_sleep >= slept_sends);  // the sleeping path carried these
  // Every wait ended one way (a readable and a writable wait per message).
  const auto& stats = report->child_stats;
  CHECK(stats.ready_at_once + stats.ready_spinning + stats.ready_after_sleep == 2 * messages);
  // How many are caught spinning is not checked: that takes the two
  // processes running at the same moment, which a host busy with other
  // tests does not give (the spin policy then stops spinning, as it
  // should). Its decisions are tested in spin_policy_test.cpp.
  MESSAGE("child waits: at once " << report->child_stats.ready_at_once << ", spinning "
                                  << report->child_stats.ready_spinning << ", after sleep "
                                  << report->child_stats.ready_after_sleep << ", sleeps "
                                  << report->child_stats.sleeps);
}

}  // namespace
}  // namespace sluice::transport::shm
