// The calling end of a stream as a plain class: pulls kept ahead, answers
// read in order, the end, errors, the deadline and cancel, and whom each
// ending is told (stream_caller.hpp).

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "actors/client/stream_caller.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::stream_caller_work;
using sluice::stream_time;

using caller = sluice::stream_caller<std::string>;
using outcome = caller::outcome;

const stream_time t0{};

caller open(std::int64_t window, stream_caller_work& w) {
  caller c{{.method = "gen", .window = window, .deadline = t0 + 10s}};
  c.opened(7, w);
  return c;
}

outcome item(std::string s) { return std::optional<std::string>{std::move(s)}; }
outcome end() { return std::optional<std::string>{}; }

}  // namespace

TEST_CASE("stream caller: opening sends the watch and one pull per credit of the window") {
  stream_caller_work w;
  auto c = open(3, w);
  CHECK(w.watch);
  CHECK(w.pulls == std::vector<std::int64_t>{0, 1, 2});
  CHECK_FALSE(w.tell_server);
  CHECK(c.id() == 7);
}

TEST_CASE("stream caller: answers that arrive out of order are read in order, each item read pulling one more") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(1, item("b"));
  stream_caller_work step;
  CHECK_FALSE(c.next(t0, step).has_value());  // item 0 has not come: wait
  CHECK_FALSE(c.ready(t0));
  c.pull_answered(0, item("a"));
  CHECK(c.ready(t0));
  auto first = c.next(t0, step);
  REQUIRE(first.has_value());
  CHECK(***first == "a");
  CHECK(step.pulls == std::vector<std::int64_t>{2});
  auto second = c.next(t0, step);
  CHECK(***second == "b");
  CHECK(step.pulls == std::vector<std::int64_t>{2, 3});
  CHECK(c.consumed() == 2);
}

TEST_CASE("stream caller: the end ends the stream without telling the server, and next() repeats it") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(0, end());
  stream_caller_work step;
  auto done = c.next(t0, step);
  REQUIRE(done.has_value());
  REQUIRE(done->ok());
  CHECK_FALSE(done->value().has_value());
  CHECK_FALSE(step.tell_server);
  CHECK_FALSE(step.cancel_calls);
  CHECK(c.over());
  auto again = c.next(t0 + 1s, step);
  CHECK(again->ok());
  CHECK_FALSE(again->value().has_value());
}

TEST_CASE("stream caller: the deadline ends the stream with timeout even with items unread, and the server is told") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(0, item("a"));
  stream_caller_work step;
  auto late = c.next(t0 + 10s, step);
  REQUIRE(late.has_value());
  CHECK(late->code() == errc::timeout);
  CHECK(step.tell_server);
  CHECK(step.cancel_calls);
  CHECK(c.arrived() == 0);
  c.pull_answered(1, item("b"));  // after the end: dropped
  CHECK(c.arrived() == 0);
}

TEST_CASE("stream caller: a handler's error comes after the items before it, and only the calls in flight are cancelled") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(1, sluice::error{errc::unavailable, "the serving process went away"});
  c.pull_answered(0, item("a"));
  stream_caller_work step;
  CHECK(***c.next(t0, step) == "a");
  auto failed = c.next(t0, step);
  CHECK(failed->code() == errc::unavailable);
  CHECK(step.cancel_calls);
  CHECK_FALSE(step.tell_server);  // it is gone: nothing to tell it
}

TEST_CASE("stream caller: a broken watch ends the stream once the items that arrived were read") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(0, item("a"));
  c.broke(sluice::error{errc::unavailable, "the watch failed"});
  stream_caller_work step;
  CHECK(***c.next(t0, step) == "a");
  CHECK(c.next(t0, step)->code() == errc::unavailable);
}

TEST_CASE("stream caller: a cancel tells the server and cancels the calls in flight, and answers after it are dropped") {
  stream_caller_work w;
  auto c = open(2, w);
  stream_caller_work step;
  c.cancel(step);
  CHECK(step.tell_server);
  CHECK(step.cancel_calls);
  c.pull_answered(0, item("a"));
  CHECK(c.next(t0, step)->code() == errc::cancelled);
  stream_caller_work twice;
  c.cancel(twice);
  CHECK_FALSE(twice.tell_server);
}

TEST_CASE("stream caller: a window outside 1..1024 fails the stream before it opens") {
  caller c{{.method = "gen", .window = 0, .deadline = t0 + 10s}};
  CHECK_FALSE(c.can_open());
  stream_caller_work step;
  CHECK(c.next(t0, step)->code() == errc::invalid_argument);
  caller big{{.method = "gen", .window = 1025, .deadline = t0 + 10s}};
  CHECK_FALSE(big.can_open());
}

TEST_CASE("stream caller: a stream that ended before its opening answer came tells the server once it knows the id") {
  caller c{{.method = "gen", .window = 2, .deadline = t0 + 10s}};
  stream_caller_work step;
  CHECK(c.next(t0 + 11s, step)->code() == errc::timeout);
  CHECK_FALSE(step.tell_server);  // no id yet
  stream_caller_work opened;
  c.opened(9, opened);
  CHECK(opened.tell_server);
  CHECK_FALSE(opened.watch);
  CHECK(opened.pulls.empty());
}

TEST_CASE("stream caller: a pull that fails after the watch broke ends the stream with the watch's error, the cause") {
  stream_caller_work w;
  auto c = open(2, w);
  c.pull_answered(0, item("a"));
  c.broke(sluice::error{errc::unavailable, "the serving client went away"});
  c.pull_answered(1, sluice::error{errc::not_found, "no instance of 'gen'"});
  stream_caller_work step;
  CHECK(***c.next(t0, step) == "a");
  auto failed = c.next(t0, step);
  CHECK(failed->code() == errc::unavailable);
}
