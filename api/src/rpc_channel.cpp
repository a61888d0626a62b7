#include "api/src/rpc_channel.hpp"

#include <sched.h>
#include <sys/socket.h>

#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/log.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/shm/frame_copy.hpp"
#include "transports/shm/waiter.hpp"

namespace sluice {
namespace {

/// Records taken per wake-up before deadlines are looked at again.
constexpr int records_per_turn = 256;
/// Longest sleep: bounds how late a vanished owner is noticed.
constexpr std::chrono::milliseconds nap{10};

}  // namespace

result<std::shared_ptr<rpc_channel>> rpc_channel::open(const std::string& address, const wire::outbound_frame& hello,
                                                       std::shared_ptr<const transport::shm::segment_list> mapped,
                                                       hooks h, std::chrono::microseconds spin) {
  auto link = transport::shm::open_client_link(address, hello, std::move(mapped));
  if (!link) return link.error();
  return std::shared_ptr<rpc_channel>{new rpc_channel{std::move(*link), std::move(h), spin}};
}

rpc_channel::rpc_channel(std::shared_ptr<transport::shm::client_link> link, hooks h, std::chrono::microseconds spin)
    : link_(std::move(link)), hooks_(std::move(h)), spin_us_(spin.count()), spin_(spin), thread_([this] { run(); }) {}

rpc_channel::~rpc_channel() {
  closing_ = true;
  stopping_ = true;
  {
    // Closing the request ring tells the owner at once; the reader wakes
    // within a nap at most.
    std::lock_guard guard{link_->send_mutex};
    link_->closed = true;
    if (link_->requests) transport::shm::close_and_wake(*link_->requests);
  }
  // Wakes our own reader too, sleeping on the response ring.
  if (link_->responses) transport::shm::close_and_wake(*link_->responses);
  if (thread_.joinable()) thread_.join();
  // The owner notices a closed socket at once (not a closed ring): it
  // drops this link's instances and fails what was relayed to them, even
  // while results read through the link keep the link object alive.
  ::shutdown(link_->socket.fd(), SHUT_RDWR);
  fail_all(error{errc::aborted, "the client is closing"});
}

std::uint64_t rpc_channel::request(wire::envelope env, shared_bytes payload, clock::time_point deadline,
                                   reply_fn done) {
  if (!usable()) {
    done(error{errc::unavailable, "the rpc link to the owner is closed"});
    return 0;
  }
  std::uint64_t id = 0;
  {
    std::lock_guard guard{pending_mutex_};
    if (pending_.full()) {
      done(error{errc::overloaded, "too many rpc calls in flight on this client"});
      return 0;
    }
    auto opened = pending_.open(deadline, std::move(done));
    SLUICE_ASSERT(opened.ok());
    id = *opened;
  }
  env.request_id = id;
  env.deadline_us = remaining_us(clock::now(), deadline);
  if (auto sent = send(wire::encode(env, std::move(payload))); !sent) {
    finish(id, sent.error());
    return 0;
  }
  return id;
}

result<void> rpc_channel::send(const wire::outbound_frame& frame) {
  std::lock_guard guard{link_->send_mutex};
  if (link_->closed) return fail(errc::unavailable, "the rpc link to the owner is closed");
  if (auto fits = transport::shm::check_outbound(frame, link_->requests->record_bytes_max() - 64); !fits) return fits;
  if (!transport::shm::write_locked(*link_, frame)) {
    return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
  }
  transport::shm::notify_poller(*link_->requests, link_->doorbell.get());
  return {};
}

void rpc_channel::finish(std::uint64_t id, result<wire::message> outcome) {
  std::optional<reply_fn> done;
  {
    std::lock_guard guard{pending_mutex_};
    done = pending_.close(id);
  }
  // Outside the lock: the answer's handler may make the next call.
  if (done) (*done)(std::move(outcome));
}

void rpc_channel::expire(clock::time_point now) {
  while (true) {
    std::optional<std::uint64_t> id;
    {
      std::lock_guard guard{pending_mutex_};
      id = pending_.first_expired(now);
    }
    if (!id) return;
    finish(*id, error{errc::timeout, "no answer before the deadline"});
  }
}

rpc_channel::clock::time_point rpc_channel::next_wake(clock::time_point now) {
  std::lock_guard guard{pending_mutex_};
  auto until = now + nap;
  if (auto next = pending_.next_deadline()) until = std::min(until, *next);
  return until;
}

void rpc_channel::fail_all(const error& why) {
  std::vector<reply_fn> failed;
  {
    std::lock_guard guard{pending_mutex_};
    for (auto id : pending_.ids_where([](const reply_fn&) { return true; })) failed.push_back(*pending_.close(id));
  }
  for (auto& done : failed) done(why);
}

void rpc_channel::dispatch(wire::message msg) {
  if (msg.env.reply_to != 0) {
    auto id = msg.env.reply_to;
    if (auto* e = std::get_if<wire::error_reply>(&msg.env.body)) return finish(id, error{e->code, e->message});
    return finish(id, std::move(msg));
  }
  auto* rpc = std::get_if<wire::rpc>(&msg.env.body);
  if (rpc == nullptr) return;  // the owner's hello
  if (msg.env.request_id != 0 && std::holds_alternative<wire::rpc_call>(rpc->body)) {
    if (hooks_.on_call) hooks_.on_call(std::move(msg));
    return;
  }
  if (auto* c = std::get_if<wire::rpc_cancel>(&rpc->body); c != nullptr && hooks_.on_cancel) hooks_.on_cancel(c->call);
}

void rpc_channel::yielding_spin(transport::shm::ring& responses) {
  spin_.set_max(std::chrono::microseconds{spin_us_.load(std::memory_order_relaxed)});
  auto spin = spin_.next_budget();
  if (spin.count() == 0) return;
  // Spinning with sched_yield: on a core of its own this is a plain spin;
  // on a core shared with the owner's poller (or anything else), whoever
  // else is runnable runs at each turn, so the spin never keeps the owner
  // from passing the next call on. A turn that hands the core away for
  // long (a busy host: the other thread ran a whole slice) ends the spin,
  // and the policy spins less next time.
  auto looked = clock::now();
  auto until = looked + spin;
  bool preempted = false;
  while (!stopping_) {
    if (responses.peek().has_value() || responses.closed()) return spin_.paid();
    ::sched_yield();
    auto now = clock::now();
    preempted = transport::shm::spin_policy::preempted(now - looked);
    if (now >= until || preempted) break;
    looked = now;
  }
  spin_.wasted(preempted);
}

void rpc_channel::run() {
  auto& responses = *link_->responses;
  // The waiter sleeps at once: this thread spins itself, yielding.
  transport::shm::waiter w{{std::chrono::microseconds{0}, std::chrono::duration_cast<std::chrono::microseconds>(nap)}};
  error down{errc::aborted, "closed locally"};
  while (!stopping_) {
    yielding_spin(responses);
    auto state = w.wait_readable(responses, next_wake(clock::now()));
    if (state == transport::shm::wait_result::broken) {
      down = error{errc::protocol, "the owner's response ring is corrupt"};
      break;
    }
    if (state == transport::shm::wait_result::closed) {
      down = error{errc::unavailable, "the owner closed the rpc link"};
      break;
    }
    if (state == transport::shm::wait_result::timed_out) {
      if (link_->socket.peer_closed()) {
        down = error{errc::unavailable, "the owner process went away"};
        break;
      }
      expire(clock::now());
      if (hooks_.on_tick) hooks_.on_tick(clock::now());
      transport::shm::flush_releases(*link_);
      continue;
    }
    for (int n = 0; n < records_per_turn; ++n) {
      auto record = responses.peek();
      if (!record) break;
      auto frame = transport::shm::take_record(link_, *record, limits_.frame);
      responses.pop();
      auto msg = frame ? wire::decode(std::move(*frame)) : result<wire::message>{frame.error()};
      if (!msg) {
        get_logger("rpc")->warn("closing the rpc link: the owner sent {}", msg.error().to_string());
        down = msg.error();
        stopping_ = true;
        break;
      }
      dispatch(std::move(*msg));
    }
    transport::shm::notify_producer(responses);
    transport::shm::flush_releases(*link_);
    expire(clock::now());
    if (hooks_.on_tick) hooks_.on_tick(clock::now());
  }
  usable_.store(false, std::memory_order_release);
  {
    std::lock_guard guard{link_->send_mutex};
    link_->closed = true;
    if (link_->requests) transport::shm::close_and_wake(*link_->requests);
  }
  fail_all(error{down.code() == errc::aborted ? errc::unavailable : down.code(),
                 "the rpc link to the owner is down: " + down.message()});
  if (!closing_ && hooks_.on_down) hooks_.on_down();
}

}  // namespace sluice
