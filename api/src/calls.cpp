// How a library thread's request leaves it (calls.hpp): on the thread's
// own direct channel to the owner (shared memory on the owner's host, a
// TCP link of its own from elsewhere), or handed to the client node's
// actor; and the synchronous request built on the two.
#include "api/src/calls.hpp"

#include <caf/send.hpp>

#include <unordered_map>
#include <variant>
#include <utility>

#include "actors/client/client.hpp"
#include "actors/client/request_table.hpp"
#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"
#include "sluice/interrupt.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/waiter.hpp"
#include "transports/tcp/tcp_call_link.hpp"

namespace sluice {
namespace {

namespace shm = transport::shm;

/// How a call waiting for its answer ends when it is not answered: by its
/// deadline, or cancelled when the thread's interrupt scope says so (asked
/// once the wait has lasted the scope's `every`, and every `every` after).
/// The answer, when it comes after either, is skipped as a late one is.
class wait_end {
 public:
  explicit wait_end(request_clock::time_point deadline)
      : deadline_(deadline),
        scope_(interrupt_scope::current()),
        ask_at_(scope_ != nullptr ? request_clock::now() + scope_->every() : request_clock::time_point::max()) {}

  /// The wait goes on at most until then before it asks over().
  request_clock::time_point next() const { return std::min(deadline_, ask_at_); }
  /// Why the wait ends now, or nothing: it goes on.
  std::optional<error> over() {
    auto now = request_clock::now();
    if (now >= deadline_) return error{errc::timeout, "no reply before the deadline"};
    if (now < ask_at_) return std::nullopt;
    if (scope_->interrupted()) return error{errc::cancelled, "interrupted while waiting for the owner's answer"};
    ask_at_ = now + scope_->every();
    return std::nullopt;
  }

 private:
  request_clock::time_point deadline_;
  const interrupt_scope* scope_;
  request_clock::time_point ask_at_;
};

/// One thread's direct channel to one client's owner: a client link of
/// its own, whose request ring this thread writes and whose response ring
/// it reads itself, spinning briefly, then sleeping on the ring's futex.
/// With the owner's poller spinning too, a round trip is two cache-line
/// transfers each way: no system call, no wake-up, no other thread. To the
/// owner it is one more link of the client: it greets like any, and the
/// leases of what it read go when it closes.
struct direct_entry {
  std::weak_ptr<int> client_alive;
  std::shared_ptr<shm::client_link> link;
  transport::transport_limits limits;
  shm::waiter waiter{shm::waiter_config{}};
  /// False once the owner went away or the channel broke.
  bool usable = false;
  /// The thread's call in flight: one at a time, as the channel allows
  /// (a thread waits for each answer before it asks again).
  request_table<std::monostate> calls{1};
  bool failed = false;  // opening failed: this thread goes the usual way

  direct_entry() = default;
  direct_entry(const direct_entry&) = delete;
  direct_entry& operator=(const direct_entry&) = delete;
  ~direct_entry() { close(); }

  /// Values read through the link may still hold leases (and keep the
  /// mapping): closing its request ring tells the owner to let go of them.
  void close() {
    if (!link) return;
    std::lock_guard guard{link->send_mutex};
    link->closed = true;
    if (link->requests) shm::close_and_wake(*link->requests);
  }

  error broken(errc code, std::string why) {
    usable = false;
    return error{code, std::move(why)};
  }

  /// Writes `request` and waits for the answer to `request_id`.
  result<wire::message> round_trip(const wire::outbound_frame& request, std::uint64_t request_id,
                                   request_clock::time_point deadline) {
    // Whether the owner's poller slept: then its answer is a wake-up away,
    // and the first wait spins (if at all) as long as a wake-up takes.
    bool woke_owner = false;
    {
      std::lock_guard guard{link->send_mutex};
      if (link->closed) return broken(errc::unavailable, "the direct shm channel is closed");
      if (!shm::write_locked(*link, request)) {
        return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
      }
      woke_owner = shm::notify_poller(*link->requests, link->doorbell.get());
    }
    auto& responses = *link->responses;
    wait_end ends{deadline};
    while (true) {
      // A nap at most, so a vanished owner is noticed while we wait.
      auto until = std::min(deadline, request_clock::now() + waiter.config().nap_us);
      auto state = waiter.wait_readable(responses, until, std::exchange(woke_owner, false));
      if (state == shm::wait_result::broken) return broken(errc::protocol, "the owner's response ring is corrupt");
      if (state == shm::wait_result::closed) return broken(errc::unavailable, "the owner closed the link");
      if (state == shm::wait_result::timed_out) {
        if (link->socket.peer_closed()) return broken(errc::unavailable, "the owner process went away");
        if (auto why = ends.over()) return *why;
        continue;
      }
      auto record = responses.peek();
      if (!record) continue;
      auto frame = shm::take_record(link, *record, limits.frame);
      responses.pop();
      shm::notify_producer(responses);
      if (!frame) return broken(frame.code(), frame.error().message());
      auto msg = wire::decode(std::move(*frame));
      if (!msg) return broken(msg.code(), msg.error().message());
      // The owner's hello and answers to calls that timed out are skipped.
      if (msg->env.reply_to == request_id) return msg;
    }
  }
};

/// Channels of this thread, by client (its `alive` token's address).
thread_local std::unordered_map<const void*, direct_entry> channels;

direct_entry& entry_for(client::impl& c) {
  // Forget channels of clients that are gone (their tokens expired).
  std::erase_if(channels, [](const auto& e) { return e.second.client_alive.expired(); });
  auto [it, inserted] = channels.try_emplace(c.alive.get());
  if (inserted) it->second.client_alive = c.alive;
  return it->second;
}

/// One thread's own TCP link to one client's owner, for a client with no
/// owner on its host: the thread writes its request and reads the answer
/// itself, so a call crosses no thread of the client; the owner's tcp
/// transport answers plain gets and puts on its I/O thread. To the owner
/// it is one more link of the client, as a direct shm channel is.
struct tcp_entry {
  std::weak_ptr<int> client_alive;
  std::shared_ptr<transport::tcp_call_link> link;
  /// The thread's call in flight: one at a time.
  request_table<std::monostate> calls{1};
  /// Opening failed: until then this thread goes the usual way.
  request_clock::time_point retry_at{};

  /// Writes `request` and reads frames until the answer to `request_id`.
  result<wire::message> round_trip(const wire::outbound_frame& request, std::uint64_t request_id,
                                   request_clock::time_point deadline) {
    if (auto sent = link->send(request, deadline); !sent) return std::move(sent).error();
    wait_end ends{deadline};
    while (true) {
      auto frame = link->receive(ends.next());
      if (!frame && frame.code() != errc::timeout) return std::move(frame).error();
      if (!frame) {
        if (auto why = ends.over()) return *why;
        continue;
      }
      auto msg = wire::decode(std::move(*frame));
      if (!msg) {
        link->shutdown();  // a stream that carried garbage is not read on
        return fail(errc::protocol, "the owner sent " + msg.error().message());
      }
      // The owner's hello and answers to calls that timed out are skipped.
      if (msg->env.reply_to == request_id) return msg;
    }
  }
};

/// TCP links of this thread, by client (its `alive` token's address).
thread_local std::unordered_map<const void*, tcp_entry> tcp_channels;

/// How long a thread whose TCP link could not be opened goes the usual
/// way before it tries again.
constexpr std::chrono::seconds tcp_retry_after{1};
/// How long opening a thread's TCP link may take (an owner that answers
/// connects within a millisecond).
constexpr std::chrono::milliseconds tcp_connect_timeout{1000};

/// The thread's usable TCP link to the owner of `c`, opened when it has
/// none; nothing when it cannot have one now.
tcp_entry* tcp_entry_for(client::impl& c, request_clock::time_point deadline) {
  std::erase_if(tcp_channels, [](const auto& e) { return e.second.client_alive.expired(); });
  auto [it, inserted] = tcp_channels.try_emplace(c.alive.get());
  auto& e = it->second;
  if (inserted) e.client_alive = c.alive;
  if (e.link && e.link->usable()) return &e;
  e.link.reset();
  auto now = request_clock::now();
  if (now < e.retry_at) return nullptr;
  auto opened = transport::tcp_call_link::open(c.tcp_address, client_hello(c), std::min(deadline, now + tcp_connect_timeout));
  std::shared_ptr<transport::tcp_call_link> link;
  if (opened) link = std::move(*opened);
  if (!link || !c.tcp_links.admit(link)) {
    e.retry_at = now + tcp_retry_after;
    return nullptr;
  }
  e.link = std::move(link);
  return &e;
}

}  // namespace

wire::outbound_frame client_hello(const client::impl& c) {
  wire::envelope env;
  env.source = c.host->id();
  env.body = wire::hello{role::client, wire::protocol_version, c.options.name, ""};
  return wire::encode(env);
}

namespace {

/// The envelope of a direct call: `request` as request `id` of this client.
wire::envelope direct_envelope(const client::impl& c, const wire::body& request, std::uint64_t id,
                               std::chrono::milliseconds timeout) {
  wire::envelope env;
  env.request_id = id;
  env.source = c.host->id();
  env.deadline_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(timeout).count());
  env.body = request;
  return env;
}

/// An answer as the caller takes it: an error reply becomes its error.
result<wire::message> answer_of(result<wire::message> msg) {
  if (!msg) return msg;
  if (auto* err = std::get_if<wire::error_reply>(&msg->env.body)) return error{err->code, err->message};
  return msg;
}

std::optional<result<wire::message>> tcp_direct_call(client::impl& c, const wire::body& request,
                                                     const shared_bytes& payload, std::chrono::milliseconds timeout) {
  auto deadline = request_clock::now() + timeout;
  auto* e = tcp_entry_for(c, deadline);
  if (e == nullptr) return std::nullopt;
  // One call at a time per thread and client, as on a shm channel.
  SLUICE_ASSERT(e->calls.size() == 0);
  auto id = e->calls.open(deadline, {});
  SLUICE_ASSERT(id.ok());
  auto msg = e->round_trip(wire::encode(direct_envelope(c, request, *id, timeout), payload), *id, deadline);
  auto closed = e->calls.close(*id);
  SLUICE_ASSERT(closed.has_value());
  return answer_of(std::move(msg));
}

std::optional<result<wire::message>> shm_direct_call(client::impl& c, const wire::body& request,
                                                     const shared_bytes& payload, std::chrono::milliseconds timeout) {
  auto& e = entry_for(c);
  if (e.failed) return std::nullopt;
  if (!e.link || !e.usable) {
    e.close();
    auto opened = shm::open_client_link(c.shm_address, client_hello(c), c.host->shm()->segments());
    if (!opened) {
      e.failed = true;
      return std::nullopt;
    }
    e.link = std::move(*opened);
    e.usable = true;
    // No thread reads this link between the thread's calls: the node's
    // shm reader tells the owner of the leases it lets go meanwhile.
    c.host->shm()->adopt(e.link);
  }
  // One call at a time per thread and client: the thread waits for each
  // answer before it asks again (a handler calling back in on the same
  // thread would have to go the usual way).
  SLUICE_ASSERT(e.calls.size() == 0);
  auto deadline = request_clock::now() + timeout;
  auto id = e.calls.open(deadline, {});
  SLUICE_ASSERT(id.ok());
  auto msg = e.round_trip(wire::encode(direct_envelope(c, request, *id, timeout), payload), *id, deadline);
  // Answered, timed out or broken: the call is over either way, and an
  // answer that comes late is skipped by the channel.
  auto closed = e.calls.close(*id);
  SLUICE_ASSERT(closed.has_value());
  return answer_of(std::move(msg));
}

}  // namespace

bool tcp_direct_links::admit(const std::shared_ptr<transport::tcp_call_link>& link) {
  std::lock_guard guard{mutex};
  std::erase_if(links, [](const auto& each) { return each.expired(); });
  if (links.size() >= tcp_direct_links_max) return false;
  links.push_back(link);
  return true;
}

tcp_direct_links::~tcp_direct_links() {
  std::lock_guard guard{mutex};
  for (auto& each : links) {
    if (auto link = each.lock()) link->shutdown();
  }
}

std::optional<result<wire::message>> direct_call(client::impl& c, const wire::body& request,
                                                 const shared_bytes& payload, std::chrono::milliseconds timeout) {
  if (shm_direct(c)) return shm_direct_call(c, request, payload, timeout);
  if (!c.tcp_address.empty()) return tcp_direct_call(c, request, payload, timeout);
  return std::nullopt;
}

bool shm_direct(const client::impl& c) {
  return !c.shm_address.empty() && c.host->shm() != nullptr && c.host->shm()->connected();
}

// --- through the client node ----------------------------------------------------


void through_node(client::impl& c, wire::body request, shared_bytes payload, std::chrono::milliseconds timeout,
                  callback<wire::message> done) {
  api_call msg;
  msg.request = std::move(request);
  msg.payload = std::move(payload);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  msg.done = std::move(done);
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

void tell_node(client::impl& c, wire::body notice) {
  api_call msg;
  msg.request = std::move(notice);
  msg.notify = true;
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

result<wire::message> ask(client::impl& c, const wire::body& request, const shared_bytes& payload,
                          std::chrono::milliseconds timeout) {
  if (auto direct = direct_call(c, request, payload, timeout)) return std::move(*direct);
  auto [done, future] = promise_callback<wire::message>();
  through_node(c, request, payload, timeout, std::move(done));
  return wait_for(std::move(future), timeout);
}

}  // namespace sluice
