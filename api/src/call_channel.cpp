#include "api/src/call_channel.hpp"

#include <sched.h>
#include <sys/socket.h>

#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/log.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/shm/frame_copy.hpp"
#include "transports/shm/spin_policy.hpp"
#include "transports/shm/waiter.hpp"
#include "transports/tcp/tcp_call_link.hpp"

namespace sluice {
namespace {

/// Records taken per wake-up before deadlines are looked at again.
constexpr int records_per_turn = 256;
/// Longest sleep: bounds how late a vanished owner is noticed.
constexpr std::chrono::milliseconds nap{10};
/// How long a frame that is not a request's (a cancel) may wait for room
/// in the kernel's send buffer.
constexpr std::chrono::seconds send_wait_max{1};

}  // namespace

/// What carries a channel: `send` from any thread, everything else on the
/// channel's thread except close().
class call_channel::link {
 public:
  /// What a read took: whole frames (or why one could not be taken), each
  /// handed on in order; false from `take` stops the read.
  using take_fn = std::function<bool(result<wire::inbound_frame>)>;

  virtual ~link() = default;
  /// Writes `frame`, waiting for room until `deadline` at most.
  virtual result<void> send(const wire::outbound_frame& frame, clock::time_point deadline) = 0;
  /// Waits until `until` for frames and hands each to `take`; returns how
  /// many it handed (0: nothing came by then), or why the link is down.
  virtual result<int> read(clock::time_point until, const take_fn& take) = 0;
  /// Closes the sending side, so that the owner learns of it, and wakes a
  /// read. Any thread; idempotent.
  virtual void close() = 0;
  /// Once the thread ended: tells the owner at once, even while values
  /// read through the link keep it alive.
  virtual void shut() = 0;
  virtual void set_spin(std::chrono::microseconds) {}
};

namespace {

/// A pair of shm rings to the owner's poller.
class shm_link final : public call_channel::link {
 public:
  shm_link(std::shared_ptr<transport::shm::client_link> link, std::chrono::microseconds spin)
      : link_(std::move(link)), spin_us_(spin.count()), spin_(spin) {}

  result<void> send(const wire::outbound_frame& frame, call_channel::clock::time_point) override {
    std::lock_guard guard{link_->send_mutex};
    if (link_->closed) return fail(errc::unavailable, "the rpc link to the owner is closed");
    if (auto fits = transport::shm::check_outbound(frame, link_->requests->record_bytes_max() - 64); !fits) return fits;
    if (!transport::shm::write_locked(*link_, frame)) {
      return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
    }
    transport::shm::notify_poller(*link_->requests, link_->doorbell.get());
    return {};
  }

  result<int> read(call_channel::clock::time_point until, const take_fn& take) override {
    auto& responses = *link_->responses;
    yielding_spin(responses);
    auto state = waiter_.wait_readable(responses, until);
    if (state == transport::shm::wait_result::broken) return fail(errc::protocol, "the owner's response ring is corrupt");
    if (state == transport::shm::wait_result::closed) return fail(errc::unavailable, "the owner closed the rpc link");
    if (state == transport::shm::wait_result::timed_out) {
      if (link_->socket.peer_closed()) return fail(errc::unavailable, "the owner process went away");
      transport::shm::flush_releases(*link_);
      return 0;
    }
    int n = 0;
    while (n < records_per_turn) {
      auto record = responses.peek();
      if (!record) break;
      auto frame = transport::shm::take_record(link_, *record, limits_.frame);
      responses.pop();
      ++n;
      if (!take(std::move(frame))) break;
    }
    transport::shm::notify_producer(responses);
    transport::shm::flush_releases(*link_);
    return n;
  }

  void close() override {
    {
      // Closing the request ring tells the owner at once; the reader
      // wakes within a nap at most.
      std::lock_guard guard{link_->send_mutex};
      link_->closed = true;
      if (link_->requests) transport::shm::close_and_wake(*link_->requests);
    }
    // Wakes our own reader too, sleeping on the response ring.
    if (link_->responses) transport::shm::close_and_wake(*link_->responses);
  }

  // The owner notices a closed socket at once (not a closed ring): it
  // drops this link's instances and fails what was relayed to them.
  void shut() override { ::shutdown(link_->socket.fd(), SHUT_RDWR); }

  void set_spin(std::chrono::microseconds spin) override { spin_us_.store(spin.count(), std::memory_order_relaxed); }

 private:
  void yielding_spin(transport::shm::ring& responses);

  std::shared_ptr<transport::shm::client_link> link_;
  transport::transport_limits limits_;
  std::atomic<std::int64_t> spin_us_;
  /// How long the thread spins now: up to spin_us_, as long as spinning
  /// pays. The thread's own.
  transport::shm::spin_policy spin_;
  /// Sleeps at once: the thread spins itself, yielding.
  transport::shm::waiter waiter_{{std::chrono::microseconds{0}, std::chrono::duration_cast<std::chrono::microseconds>(nap)}};
};

void shm_link::yielding_spin(transport::shm::ring& responses) {
  spin_.set_max(std::chrono::microseconds{spin_us_.load(std::memory_order_relaxed)});
  auto spin = spin_.next_budget();
  if (spin.count() == 0) return;
  // Spinning with sched_yield: on a core of its own this is a plain spin;
  // on a core shared with the owner's poller (or anything else), whoever
  // else is runnable runs at each turn, so the spin never keeps the owner
  // from passing the next call on. A turn that hands the core away for
  // long (a busy host: the other thread ran a whole slice) ends the spin,
  // and the policy spins less next time.
  auto looked = call_channel::clock::now();
  auto until = looked + spin;
  bool preempted = false;
  while (true) {
    if (responses.peek().has_value() || responses.closed()) return spin_.paid();
    ::sched_yield();
    auto now = call_channel::clock::now();
    preempted = transport::shm::spin_policy::preempted(now - looked);
    if (now >= until || preempted) break;
    looked = now;
  }
  spin_.wasted(preempted);
}

/// A TCP connection of the channel's own. The thread blocks in recv (one
/// system call waits for an answer and takes it); senders take turns on
/// the socket, each writing on its own thread.
class tcp_link final : public call_channel::link {
 public:
  explicit tcp_link(std::unique_ptr<transport::tcp_call_link> link) : link_(std::move(link)) {}

  result<void> send(const wire::outbound_frame& frame, call_channel::clock::time_point deadline) override {
    std::lock_guard guard{send_mutex_};
    return link_->send(frame, deadline);
  }

  result<int> read(call_channel::clock::time_point until, const take_fn& take) override {
    if (down_) return *down_;
    int n = 0;
    // The first frame waits until `until`; those already read ahead with
    // it are taken without waiting.
    for (auto wait = until; n < records_per_turn; wait = call_channel::clock::now()) {
      auto frame = link_->receive(wait);
      if (frame) {
        ++n;
        if (!take(std::move(frame))) break;
        continue;
      }
      if (frame.code() == errc::timeout && link_->usable()) break;
      // Down: said now, or at the next read when frames came before.
      if (n == 0) return std::move(frame).error();
      down_ = std::move(frame).error();
      break;
    }
    return n;
  }

  // The owner sees the close; a read wakes and a send fails, unavailable.
  void close() override { link_->shutdown(); }

  void shut() override { link_->shutdown(); }

 private:
  std::unique_ptr<transport::tcp_call_link> link_;
  std::mutex send_mutex_;  // senders take turns
  std::optional<error> down_;  // the reader's
};

}  // namespace

result<std::shared_ptr<call_channel>> call_channel::open(const std::string& address, const wire::outbound_frame& hello,
                                                       std::shared_ptr<const transport::shm::segment_list> mapped,
                                                       hooks h, std::chrono::microseconds spin) {
  auto opened = transport::shm::open_client_link(address, hello, std::move(mapped));
  if (!opened) return opened.error();
  return std::shared_ptr<call_channel>{new call_channel{std::make_unique<shm_link>(std::move(*opened), spin), std::move(h)}};
}

result<std::shared_ptr<call_channel>> call_channel::open_tcp(const std::string& address, const wire::outbound_frame& hello,
                                                           clock::time_point deadline, hooks h,
                                                           wire::frame_limits limits) {
  auto opened = transport::tcp_call_link::open(address, hello, deadline, limits);
  if (!opened) return opened.error();
  return std::shared_ptr<call_channel>{new call_channel{std::make_unique<tcp_link>(std::move(*opened)), std::move(h)}};
}

call_channel::call_channel(std::unique_ptr<link> l, hooks h)
    : link_(std::move(l)), hooks_(std::move(h)), thread_([this] { run(); }) {}

call_channel::~call_channel() {
  closing_ = true;
  stopping_ = true;
  link_->close();
  if (thread_.joinable()) thread_.join();
  link_->shut();
  fail_all(error{errc::aborted, "the client is closing"});
}

void call_channel::set_spin(std::chrono::microseconds spin) { link_->set_spin(spin); }

std::uint64_t call_channel::request(wire::envelope env, shared_bytes payload, clock::time_point deadline,
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
  if (auto sent = link_->send(wire::encode(env, std::move(payload)), deadline); !sent) {
    finish(id, sent.error());
    return 0;
  }
  return id;
}

result<void> call_channel::send(const wire::outbound_frame& frame) {
  return link_->send(frame, clock::now() + send_wait_max);
}

void call_channel::finish(std::uint64_t id, result<wire::message> outcome) {
  std::optional<reply_fn> done;
  {
    std::lock_guard guard{pending_mutex_};
    done = pending_.close(id);
  }
  // Outside the lock: the answer's handler may make the next call.
  if (done) (*done)(std::move(outcome));
}

void call_channel::expire(clock::time_point now) {
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

call_channel::clock::time_point call_channel::next_wake(clock::time_point now) {
  std::lock_guard guard{pending_mutex_};
  auto until = now + nap;
  if (auto next = pending_.next_deadline()) until = std::min(until, *next);
  return until;
}

void call_channel::fail_all(const error& why) {
  std::vector<reply_fn> failed;
  {
    std::lock_guard guard{pending_mutex_};
    for (auto id : pending_.ids_where([](const reply_fn&) { return true; })) failed.push_back(*pending_.close(id));
  }
  for (auto& done : failed) done(why);
}

void call_channel::dispatch(wire::message msg) {
  if (msg.env.reply_to != 0) {
    auto id = msg.env.reply_to;
    if (auto* e = std::get_if<wire::error_reply>(&msg.env.body)) return finish(id, error{e->code, e->message});
    return finish(id, std::move(msg));
  }
  if (std::holds_alternative<wire::hello>(msg.env.body)) return;  // the owner's greeting
  if (hooks_.on_frame) hooks_.on_frame(std::move(msg));
}

void call_channel::run() {
  error down{errc::aborted, "closed locally"};
  auto take = [this, &down](result<wire::inbound_frame> frame) {
    auto msg = frame ? wire::decode(std::move(*frame)) : result<wire::message>{frame.error()};
    if (!msg) {
      get_logger("rpc")->warn("closing the rpc link: the owner sent {}", msg.error().to_string());
      down = msg.error();
      stopping_ = true;
      return false;
    }
    dispatch(std::move(*msg));
    return true;
  };
  while (!stopping_) {
    auto took = link_->read(next_wake(clock::now()), take);
    if (!took) {
      down = std::move(took).error();
      break;
    }
    expire(clock::now());
    if (hooks_.on_tick) hooks_.on_tick(clock::now());
  }
  usable_.store(false, std::memory_order_release);
  link_->close();
  fail_all(error{down.code() == errc::aborted ? errc::unavailable : down.code(),
                 "the rpc link to the owner is down: " + down.message()});
  if (!closing_ && hooks_.on_down) hooks_.on_down();
}

}  // namespace sluice
