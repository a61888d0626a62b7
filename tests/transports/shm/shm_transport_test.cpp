// The shm transport: a client and its owner over rings in shared memory.

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "runtime/memory/pool.hpp"
#include "tests/transports/shm/shm_fixtures.hpp"
#include "tests/transports/test_sink.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/shm_server.hpp"
#include "transports/shm/waiter.hpp"

namespace {

using namespace sluice;
using namespace sluice::transport;
using namespace sluice::transport::testing;
using namespace std::chrono_literals;

}  // namespace

TEST_CASE("shm: frames flow both ways between a client and its owner") {
  recording_sink owner_sink, client_sink;
  shm_server server{1, owner_sink, {}, small_rings()};
  auto name = unique_name("basic");
  REQUIRE(server.listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  auto server_link = owner_sink.wait_up();
  REQUIRE(server_link.has_value());

  for (std::uint64_t i = 0; i < 200; ++i) {
    REQUIRE(client.send(*link, make_frame(i, patterned(i * 97 % 5000, i))).ok());
  }
  REQUIRE(owner_sink.wait_frames(*server_link, 200));
  auto got = owner_sink.frames(*server_link);
  for (std::uint64_t i = 0; i < 200; ++i) {
    CHECK(sequence_of(got[i]) == i);
    CHECK(envelope_intact(got[i], i));
    CHECK(is_patterned(got[i].payload, i * 97 % 5000, i));
  }
  REQUIRE(server.send(*server_link, make_frame(7, patterned(100000, 7))).ok());
  REQUIRE(client_sink.wait_frames(*link, 1));
  CHECK(is_patterned(client_sink.frames(*link)[0].payload, 100000, 7));
  CHECK(owner_sink.orderly());
  CHECK(client_sink.orderly());
}

TEST_CASE("shm: a client maps the owner's pool and sees what the owner wrote") {
  auto p = pool::create({"shm-test", 4u << 20, 4u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  auto r = (*p)->allocate(4096);
  REQUIRE(r.ok());
  auto bytes = (*p)->resolve(*r).value();
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i % 251);

  recording_sink owner_sink, client_sink;
  auto options = small_rings();
  for (std::uint32_t s = 0; s < (*p)->segment_count(); ++s) {
    options.segments.push_back({(*p)->segment_at(s).fd(), (*p)->segment_at(s).size_bytes(),
                                (*p)->segment_at(s).base()});
  }
  shm_server server{1, owner_sink, {}, options};
  auto name = unique_name("pool");
  REQUIRE(server.listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  auto mapped = client.resolve(*r);
  REQUIRE(mapped.has_value());
  CHECK(mapped->data() != bytes.data());  // another mapping of the same memory
  CHECK(std::memcmp(mapped->data(), bytes.data(), 4096) == 0);
  (*mapped)[0] = std::byte{0x5a};
  CHECK(bytes[0] == std::byte{0x5a});
  CHECK_FALSE(client.resolve(region{0, (4u << 20) - 10, 100}).has_value());
  CHECK_FALSE(client.resolve(region{7, 0, 1}).has_value());
}

TEST_CASE("shm: an owner learns at once that a client process died") {
  recording_sink owner_sink;
  shm_server server{1, owner_sink, {}, small_rings()};
  auto name = unique_name("crash");
  REQUIRE(server.listen(name).ok());
  pid_t child = ::fork();
  if (child == 0) {
    recording_sink sink;
    shm_client client{2, sink};
    auto link = client.connect(name);
    if (!link || !sink.wait_link_up(*link)) _exit(1);
    (void)client.send(*link, make_frame(1));
    ::pause();  // until killed
    _exit(0);
  }
  auto link = owner_sink.wait_up();
  REQUIRE(link.has_value());
  REQUIRE(owner_sink.wait_frames(*link, 1));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  auto down = owner_sink.wait_down(*link);
  REQUIRE(down.has_value());
  CHECK(down->code() == errc::unavailable);
}

TEST_CASE("shm: a client learns that its owner went away") {
  recording_sink owner_sink, client_sink;
  auto server = std::make_unique<shm_server>(1, owner_sink, transport_limits{}, small_rings());
  auto name = unique_name("owner-gone");
  REQUIRE(server->listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  server.reset();
  auto down = client_sink.wait_down(*link);
  REQUIRE(down.has_value());
  CHECK(client.send(*link, make_frame(1)).code() == errc::unavailable);
  CHECK(client.connect(name).code() == errc::unavailable);
}

TEST_CASE("shm: a frame that does not fit the ring is refused, not truncated") {
  recording_sink owner_sink, client_sink;
  shm_server server{1, owner_sink, {}, small_rings()};
  auto name = unique_name("big");
  REQUIRE(server.listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  CHECK(client.send(*link, make_frame(1, patterned(2u << 20, 1))).code() == errc::invalid_argument);
  REQUIRE(client.send(*link, make_frame(2, patterned(10, 2))).ok());
  auto server_link = owner_sink.wait_up();
  REQUIRE(owner_sink.wait_frames(*server_link, 1));
  CHECK(sequence_of(owner_sink.frames(*server_link)[0]) == 2);
}

TEST_CASE("shm: nobody listening fails the connect at once") {
  recording_sink sink;
  shm_client client{2, sink};
  CHECK(client.connect(unique_name("nobody")).code() == errc::unavailable);
}

TEST_CASE("shm: a payload in the owner's pool is read in place and its lease comes back when released") {
  auto p = pool::create({"shm-lease", 4u << 20, 4u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  auto r = (*p)->allocate(64 * 1024);
  REQUIRE(r.ok());
  auto bytes = (*p)->resolve(*r).value();
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i % 253);
  std::atomic<int> released{0};
  auto payload = counted(bytes, released);

  recording_sink owner_sink, client_sink;
  auto options = rings_with_pool(**p);
  shm_server server{1, owner_sink, {}, options};
  auto name = unique_name("lease");
  REQUIRE(server.listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  auto server_link = owner_sink.wait_up();
  REQUIRE(server.send(*server_link, make_frame(9, std::move(payload))).ok());
  REQUIRE(client_sink.wait_frames(*link, 1));
  {
    auto frames = client_sink.frames(*link);
    auto& got = frames[0].payload;
    CHECK(got.size() == 64 * 1024);
    CHECK(got.data() == client.resolve(*r)->data());  // the client's mapping, no copy
    CHECK(std::memcmp(got.data(), bytes.data(), got.size()) == 0);
    // The owner holds it for the client as long as the client holds it,
    // however long that is.
    std::this_thread::sleep_for(50ms);
    CHECK(released == 0);
  }
  client_sink.clear_frames(*link);
  // The client let go of its only copy: the lease goes back within a nap.
  for (int i = 0; i < 500 && released == 0; ++i) std::this_thread::sleep_for(2ms);
  CHECK(released == 1);
}

TEST_CASE("shm: an owner stops reading a client that does not read its answers, and loses none of them") {
  // Every request is answered on the poller with 64 KiB that go through
  // the ring: 1 MiB of ring and 1 MiB of queue hold about 32 answers.
  std::atomic<int> answered{0};
  auto options = small_rings();
  options.fast_path = [&answered](link_id, const wire::inbound_frame& frame,
                                  std::optional<wire::message>&) -> std::optional<fast_taken> {
    ++answered;
    auto n = sequence_of(frame);
    return fast_taken{make_frame(n, patterned(64 << 10, n))};
  };
  transport_limits limits;
  limits.max_queued_bytes = 1 << 20;
  recording_sink owner_sink;
  shm_server server{1, owner_sink, limits, options};
  auto name = unique_name("unread");
  REQUIRE(server.listen(name).ok());
  auto link = shm::open_client_link(name, make_frame(0));
  REQUIRE(link.ok());
  auto& c = **link;
  constexpr std::uint64_t requests = 200;
  for (std::uint64_t i = 1; i <= requests; ++i) {
    std::lock_guard guard{c.send_mutex};
    REQUIRE(shm::write_locked(c, make_frame(i)));
    shm::notify_poller(*c.requests, c.doorbell.get());
  }
  // Nothing reads the answers: the poller stops near the bound.
  std::this_thread::sleep_for(300ms);
  auto before_reading = answered.load();
  CHECK(before_reading >= 16);
  CHECK(before_reading <= 40);
  // Reading them lets the rest through, every answer once and in order.
  std::uint64_t next = 1;
  auto until = std::chrono::steady_clock::now() + 20s;
  while (next <= requests && std::chrono::steady_clock::now() < until) {
    auto record = c.responses->peek();
    if (!record) {
      std::this_thread::sleep_for(100us);
      continue;
    }
    auto frame = shm::take_record(*link, *record, limits.frame);
    c.responses->pop();
    shm::notify_producer(*c.responses);
    REQUIRE(frame.ok());
    CHECK(sequence_of(*frame) == next);
    CHECK(is_patterned(frame->payload, 64 << 10, next));
    ++next;
  }
  CHECK(next == requests + 1);
  CHECK(answered.load() == static_cast<int>(requests));
}

TEST_CASE("shm: a client that holds more values than its lease bound is disconnected, which releases them all") {
  auto p = pool::create({"shm-lease-bound", 4u << 20, 4u << 20, false, prefault_mode::none});
  REQUIRE(p.ok());
  auto r = (*p)->allocate(4096);
  REQUIRE(r.ok());
  auto bytes = (*p)->resolve(*r).value();
  std::atomic<int> released{0};
  auto payload = counted(bytes, released);

  recording_sink owner_sink, client_sink;
  auto options = rings_with_pool(**p);
  options.leases_per_client_max = 8;
  shm_server server{1, owner_sink, {}, options};
  auto name = unique_name("lease-bound");
  REQUIRE(server.listen(name).ok());
  shm_client client{2, client_sink};
  auto link = client.connect(name);
  REQUIRE(link.ok());
  REQUIRE(client_sink.wait_link_up(*link));
  auto server_link = owner_sink.wait_up();
  REQUIRE(server_link.has_value());
  // The recording client keeps every frame, so it never releases a lease.
  for (std::uint64_t i = 0; i < 8; ++i) REQUIRE(server.send(*server_link, make_frame(i, payload)).ok());
  REQUIRE(client_sink.wait_frames(*link, 8));
  (void)server.send(*server_link, make_frame(8, payload));
  auto down = owner_sink.wait_down(*server_link);
  REQUIRE(down.has_value());
  CHECK(client_sink.wait_down(*link).has_value());
  CHECK(client_sink.frames(*link).size() == 8);
  // The owner let go of all eight leases when it closed the link: once
  // the test's own reference goes, nothing holds the value.
  payload = {};
  auto until = std::chrono::steady_clock::now() + 2s;
  while (released == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(released == 1);
}
