// The rdma path on the software provider: two engines of one process set
// a queue pair up, one reads the other's registered memory with one-sided
// reads whose completions arrive on the poller thread, an injected fault
// fails a read and flushes the rest of its pair, and bad posts fail at
// once.

#include "transports/rdma/rdma_engine.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace sluice::transport::rdma {
namespace {

using namespace std::chrono_literals;

/// Completions as the poller thread delivers them.
struct inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<rdma_completion> got;
  rdma_engine::completion_handler handler() {
    return [this](rdma_completion c) {
      std::lock_guard lock{mutex};
      got.push_back(std::move(c));
      cv.notify_all();
    };
  }
  std::vector<rdma_completion> wait(std::size_t n) {
    std::unique_lock lock{mutex};
    cv.wait_for(lock, 5s, [&] { return got.size() >= n; });
    return got;
  }
};

struct two_engines {
  std::vector<std::byte> held = std::vector<std::byte>(4 << 20);
  std::vector<std::byte> room = std::vector<std::byte>(4 << 20);
  inbox holder_box;
  inbox reader_box;
  rdma_engine holder;
  rdma_engine reader;
  std::uint64_t reader_pair = 0;

  explicit two_engines(soft_options reader_options = {})
      : holder{make_soft_provider({}), holder_box.handler()},
        reader{make_soft_provider(reader_options), reader_box.handler()} {
    for (std::size_t i = 0; i < held.size(); ++i) held[i] = static_cast<std::byte>(i * 13 + 5);
    REQUIRE(holder.add_segment(0, held).ok());
    REQUIRE(reader.add_segment(0, room).ok());
    reader_pair = connect();
  }

  /// A fresh pair from the reader to the holder.
  std::uint64_t connect() {
    auto h = holder.open_pair().value();
    auto r = reader.open_pair().value();
    REQUIRE(holder.connect_pair(h.first, r.second).ok());
    REQUIRE(reader.connect_pair(r.first, h.second).ok());
    return r.first;
  }

  result<void> read_piece(std::uint64_t pair, std::uint64_t offset, std::uint64_t length, std::uint64_t work) {
    auto seg = holder.segments().at(0);
    return reader.post_read(pair, wire::pool_region{0, offset, length}, seg.address + offset, seg.rkey, work);
  }
};

TEST_CASE("rdma path: one-sided reads on the software provider copy the peer's registered memory into the pool") {
  two_engines e;
  CHECK(e.reader.provider() == "soft");
  auto segs = e.holder.segments();
  REQUIRE(segs.size() == 1);
  CHECK(segs[0].length == e.held.size());
  for (std::uint64_t i = 0; i < 4; ++i) REQUIRE(e.read_piece(e.reader_pair, i << 20, 1 << 20, 100 + i).ok());
  auto got = e.reader_box.wait(4);
  REQUIRE(got.size() == 4);
  for (auto& c : got) CHECK_MESSAGE(c.ok, c.error);
  CHECK(std::memcmp(e.room.data(), e.held.data(), e.held.size()) == 0);
  CHECK(e.holder_box.got.empty());  // the holder's side takes no part
}

TEST_CASE("rdma path: an injected failure fails its read, flushes the rest of the pair, and a fresh pair reads again") {
  two_engines e{soft_options{2, 0us}};
  for (std::uint64_t i = 0; i < 3; ++i) REQUIRE(e.read_piece(e.reader_pair, i << 20, 1 << 20, i + 1).ok());
  auto got = e.reader_box.wait(3);
  REQUIRE(got.size() == 3);
  CHECK(got[0].ok);
  CHECK_FALSE(got[1].ok);
  CHECK(got[1].error.find("injected") != std::string::npos);
  CHECK_FALSE(got[2].ok);
  CHECK(got[2].error.find("Flushed") != std::string::npos);

  e.reader.close_pair(e.reader_pair);
  auto fresh = e.connect();
  REQUIRE(e.read_piece(fresh, 3 << 20, 1 << 20, 9).ok());
  got = e.reader_box.wait(4);
  REQUIRE(got.size() == 4);
  CHECK(got[3].ok);
  CHECK(std::memcmp(e.room.data() + (3 << 20), e.held.data() + (3 << 20), 1 << 20) == 0);
}

TEST_CASE("rdma path: a read into an unknown pair or outside the pool fails at once, before anything moves") {
  two_engines e;
  CHECK(e.read_piece(e.reader_pair + 100, 0, 4096, 1).code() == errc::invalid_argument);
  CHECK(e.read_piece(e.reader_pair, 4 << 20, 1, 2).code() == errc::invalid_argument);
  auto seg = e.holder.segments().at(0);
  CHECK(e.reader.post_read(e.reader_pair, wire::pool_region{7, 0, 64}, seg.address, seg.rkey, 3).code() ==
        errc::invalid_argument);
  wire::rdma_endpoint bad{1, 0, 0, "short"};
  CHECK(e.reader.connect_pair(e.reader_pair, bad).code() == errc::protocol);
}

}  // namespace
}  // namespace sluice::transport::rdma
