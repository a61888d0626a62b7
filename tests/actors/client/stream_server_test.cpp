// The serving end of a stream as a plain class: credit, pulls and items
// held, the watch, cancel, the end, stop and retire (serve_table.hpp: stream_server).

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "actors/client/serve_table.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::stream_answer_kind;
using sluice::stream_time;

/// Items are strings; a handle is the number of the call it answers.
using server = sluice::stream_server<std::string, int>;
using work = server::work;

const stream_time t0{};
constexpr int watch_call = 100;

server open(std::int64_t window, bool planted = false) {
  return server{{.method = "gen", .window = window, .deadline = t0 + 10s, .plant_repeat_after_credit_race = planted}};
}

/// Reserves a place and writes `item` there; returns the place.
std::int64_t write(server& s, const std::string& item, work& out, stream_time now = t0) {
  auto place = s.reserve(now, out);
  REQUIRE(place.ok());
  REQUIRE(place->has_value());
  auto seq = **place;
  REQUIRE(s.ready(seq, item, out).ok());
  return seq;
}

/// The answer given to call `to`, if any.
const sluice::stream_answer<std::string, int>* answer_to(const work& w, int to) {
  for (auto& a : w.answers) {
    if (a.to == to) return &a;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("stream server: a pull is answered with its item once it is written, and the pull past the last with the end") {
  auto s = open(2);
  work w;
  s.pull(0, 0, w);
  CHECK(w.answers.empty());  // nothing written yet: the pull waits
  write(s, "a", w);
  REQUIRE(answer_to(w, 0) != nullptr);
  CHECK(answer_to(w, 0)->kind == stream_answer_kind::item);
  CHECK(*answer_to(w, 0)->item == "a");
  write(s, "b", w);  // written before its pull: held
  CHECK(s.items_held() == 1);
  s.finish(w);
  s.pull(1, 1, w);
  CHECK(*answer_to(w, 1)->item == "b");
  CHECK_FALSE(s.retired());
  s.pull(2, 2, w);
  CHECK(answer_to(w, 2)->kind == stream_answer_kind::end);
  CHECK(s.retired());
  CHECK(w.retired);
}

TEST_CASE("stream server: a caller that pulls out of turn cannot make the server hold more than its window") {
  auto s = open(2);
  work w;
  // Pulls far ahead grant credit up to item 11, but items 0 to 9 are never pulled.
  s.pull(10, 10, w);
  s.pull(11, 11, w);
  write(s, "0", w);
  write(s, "1", w);
  CHECK(s.items_held() == 2);
  CHECK(s.credit() == 0);
  auto place = s.reserve(t0, w);
  REQUIRE(place.ok());
  CHECK_FALSE(place->has_value());  // no room: the writer waits
  // A third pull held would be past the window: refused.
  s.pull(12, 12, w);
  REQUIRE(answer_to(w, 12) != nullptr);
  CHECK(answer_to(w, 12)->err->code() == errc::invalid_argument);
  CHECK(s.pulls_held() == 2);
}

TEST_CASE("stream server: a writer without credit is told to wait, and a pull gives it the credit") {
  auto s = open(1);
  work w;
  write(s, "0", w);
  s.pull(0, 0, w);
  CHECK(s.credit() == 0);  // item 1 was not granted yet
  auto place = s.reserve(t0, w);
  REQUIRE(place.ok());
  CHECK_FALSE(place->has_value());
  s.pull(1, 1, w);
  CHECK(s.credit() == 1);
  CHECK(write(s, "1", w) == 1);
  CHECK(*answer_to(w, 1)->item == "1");
}

TEST_CASE("stream server: bad pulls are refused, negative or twice, and leave the stream as it was") {
  auto s = open(4);
  work w;
  s.pull(-1, 1, w);
  s.pull(3, 2, w);
  s.pull(3, 3, w);
  CHECK(answer_to(w, 1)->kind == stream_answer_kind::error);
  CHECK(answer_to(w, 2) == nullptr);  // held
  CHECK(answer_to(w, 3)->err->code() == errc::invalid_argument);
  CHECK(s.pulls_held() == 1);
}

TEST_CASE("stream server: a cancel stops the stream, ends the held pulls and the watch with cancelled, then is answered") {
  auto s = open(2);
  work w;
  s.watch(watch_call, w);
  s.pull(0, 0, w);
  s.cancel(7, t0 + 1s, w);
  CHECK(w.stopped);
  CHECK(w.retired);
  CHECK(answer_to(w, 0)->err->code() == errc::cancelled);
  CHECK(answer_to(w, watch_call)->err->code() == errc::cancelled);
  CHECK(w.answers.back().to == 7);
  CHECK(w.answers.back().kind == stream_answer_kind::done);
  auto place = s.reserve(t0 + 1s, w);
  REQUIRE_FALSE(place.ok());
  CHECK(place.error().code() == errc::cancelled);
  CHECK(s.cancelled(t0));
}

TEST_CASE("stream server: past its deadline a write fails with timeout and so do the held pulls") {
  auto s = open(2);
  work w;
  s.pull(0, 0, w);
  CHECK_FALSE(s.cancelled(t0 + 9s));
  auto place = s.reserve(t0 + 10s, w);
  REQUIRE_FALSE(place.ok());
  CHECK(place.error().code() == errc::timeout);
  CHECK(answer_to(w, 0)->err->code() == errc::timeout);
  CHECK(s.retired());
}

TEST_CASE("stream server: a cancel of a pull after the deadline stops the stream with timeout, not cancelled") {
  auto s = open(2);
  work w;
  s.pull(0, 0, w);
  s.call_cancelled(t0 + 11s, w);
  CHECK(answer_to(w, 0)->err->code() == errc::timeout);
}

TEST_CASE("stream server: fail() ends the stream with the handler's error, named, after the items written") {
  auto s = open(2);
  work w;
  write(s, "0", w);
  s.fail(sluice::error{errc::invalid_argument, "bad prompt"}, w);
  s.pull(0, 0, w);
  s.pull(1, 1, w);
  CHECK(*answer_to(w, 0)->item == "0");
  REQUIRE(answer_to(w, 1)->err.has_value());
  CHECK(answer_to(w, 1)->err->code() == errc::invalid_argument);
  CHECK(answer_to(w, 1)->err->message() == "'gen': bad prompt");
  auto place = s.reserve(t0, w);
  CHECK(place.code() == errc::invalid_argument);  // ended already
}

TEST_CASE("stream server: an item that cannot be encoded ends the stream there with its error") {
  auto s = open(3);
  work w;
  write(s, "0", w);
  auto place = s.reserve(t0, w);
  REQUIRE(place.ok());
  s.unencodable(**place, sluice::error{errc::no_capacity, "the pool is full"}, w);
  s.pull(0, 0, w);
  s.pull(1, 1, w);
  CHECK(*answer_to(w, 0)->item == "0");
  CHECK(answer_to(w, 1)->err->code() == errc::no_capacity);
  CHECK(answer_to(w, 1)->err->message() == "'gen': an item could not be sent: the pool is full");
  CHECK(s.retired());
}

TEST_CASE("stream server: an item still being encoded when the end is delivered is read before the stream retires") {
  auto s = open(2);
  work w;
  auto place = s.reserve(t0, w);
  REQUIRE(place.ok());
  s.finish(w);  // another thread ends the stream while item 0 is being encoded
  s.pull(1, 1, w);
  CHECK(answer_to(w, 1)->kind == stream_answer_kind::end);
  CHECK_FALSE(s.retired());
  s.pull(0, 0, w);
  REQUIRE(s.ready(**place, "0", w).ok());
  CHECK(*answer_to(w, 0)->item == "0");
  CHECK(s.retired());
}

TEST_CASE("stream server: an item written after the stream stopped is dropped and its write fails") {
  auto s = open(2);
  work w;
  auto place = s.reserve(t0, w);
  REQUIRE(place.ok());
  s.lost(sluice::error{errc::unavailable, "the link broke"}, w);
  work after;
  auto written = s.ready(**place, "0", after);
  CHECK(written.code() == errc::unavailable);
  CHECK(after.dropped.size() == 1);
  CHECK(after.answers.empty());
}

TEST_CASE("stream server: after it retired nothing it held is answered again, and a late call gets its end at once") {
  auto s = open(2);
  work w;
  write(s, "0", w);  // held, never pulled
  s.watch(watch_call, w);
  s.lost(sluice::error{errc::unavailable, "the link broke"}, w);
  CHECK(w.dropped.size() == 1);
  CHECK(answer_to(w, watch_call)->err->code() == errc::unavailable);
  work late;
  s.pull(0, 0, late);
  s.watch(watch_call + 1, late);
  s.lost(sluice::error{errc::unavailable, "again"}, late);
  REQUIRE(late.answers.size() == 2);
  CHECK(late.answers[0].err->code() == errc::unavailable);
  CHECK(late.answers[1].err->message() == "the link broke");
  CHECK_FALSE(late.retired);
}

TEST_CASE("stream server: a second watch replaces the first, which is refused") {
  auto s = open(1);
  work w;
  s.watch(1, w);
  s.watch(2, w);
  REQUIRE(answer_to(w, 1) != nullptr);
  CHECK(answer_to(w, 1)->err->code() == errc::invalid_argument);
  s.finish(w);
  s.pull(0, 0, w);
  CHECK(answer_to(w, 2)->kind == stream_answer_kind::end);
}

TEST_CASE("stream server: the window is clamped to 1..1024 at opening") {
  CHECK(server::window_for(0) == 1);
  CHECK(server::window_for(-5) == 1);
  CHECK(server::window_for(16) == 16);
  CHECK(server::window_for(5000) == sluice::rpc_stream_window_max);
}

TEST_CASE("stream server: the planted credit-race bug answers a pull that outran the writer with the last item again") {
  auto s = open(1, true);
  work w;
  s.pull(0, 0, w);
  write(s, "0", w);
  s.pull(1, 1, w);  // before the writer reached item 1
  REQUIRE(answer_to(w, 1) != nullptr);
  CHECK(*answer_to(w, 1)->item == "0");
  auto clean = open(1);
  work v;
  clean.pull(0, 0, v);
  write(clean, "0", v);
  clean.pull(1, 1, v);
  CHECK(answer_to(v, 1) == nullptr);  // without it the pull waits for its item
}
