#include "transports/shm/shm_server.hpp"

#include "runtime/assert.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <cstring>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "transports/shm/frame_copy.hpp"
#include "transports/shm/spin_policy.hpp"

namespace sluice::transport {
namespace {

constexpr std::uint64_t wake_key = 1;
constexpr std::uint64_t doorbell_key = 2;
constexpr std::uint64_t listener_key = 3;
/// Records taken from one client's ring before the others get a turn.
constexpr int records_per_turn = 64;
/// Spin iterations between two non-blocking looks at the sockets, so new
/// clients and closed ones are noticed while the poller is busy.
constexpr int spins_per_event_check = 256;
/// Idle spin iterations between two reads of the clock.
constexpr int spins_per_clock_read = 64;

void add_to_epoll(int epoll_fd, int fd, std::uint64_t key, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

void drain_eventfd(int fd) {
  std::uint64_t value = 0;
  [[maybe_unused]] auto n = ::read(fd, &value, sizeof value);
}

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

struct shm_server::client {
  link_id id = 0;
  std::string peer;
  shm::unix_socket socket;
  std::unique_ptr<shm::channel_memory> memory;
  std::optional<shm::ring> requests;  // consumer: poller thread only

  std::mutex send_mutex;
  std::optional<shm::ring> responses;  // producer: under send_mutex
  /// Frames for the client that found its response ring full, oldest
  /// first; under send_mutex. Bounded: see queue_or_write().
  std::deque<wire::outbound_frame> overflow;
  /// Their bytes; written under send_mutex, read by the poller without it.
  std::atomic<std::uint64_t> overflow_bytes{0};
  bool closed = false;  // under send_mutex
  // Payloads the client reads in place, by lease id; under send_mutex.
  std::unordered_map<std::uint64_t, shared_bytes> leases;
  std::uint64_t next_lease = 1;  // under send_mutex

  std::atomic<bool> close_requested{false};
  std::atomic<bool> has_overflow{false};  // overflow is not empty
  bool greeted = false;  // poller only: a first frame went to the sink

  explicit client(shm::unix_socket s) : socket(std::move(s)) {}
};

shm_server::shm_server(std::uint16_t tag, link_sink& sink, transport_limits limits,
                       shm_server_options options)
    : tag_(tag), sink_(sink), limits_(limits), options_(std::move(options)), log_(get_logger("shm")) {
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  doorbell_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !doorbell_fd_ || !wake_fd_) {
    throw std::system_error(errno, std::generic_category(), "shm: epoll/eventfd");
  }
  add_to_epoll(epoll_fd_.get(), wake_fd_.get(), wake_key, EPOLLIN);
  add_to_epoll(epoll_fd_.get(), doorbell_fd_.get(), doorbell_key, EPOLLIN);
  poller_ = std::thread([this] { run(); });
}

shm_server::~shm_server() { shutdown(); }

result<std::string> shm_server::listen(std::string_view address) {
  auto l = shm::unix_listener::listen(address);
  if (!l) return l.error();
  if (auto ok = l->set_nonblocking(true); !ok) return ok.error();
  std::lock_guard guard{mutex_};
  if (listener_) return fail(errc::conflict, "this shm transport listens already");
  add_to_epoll(epoll_fd_.get(), l->fd(), listener_key, EPOLLIN);
  listener_.emplace(std::move(*l));
  log_->debug("listening on {}", address);
  return std::string{address};
}

result<link_id> shm_server::connect(std::string_view address) {
  return fail(errc::invalid_argument,
              "an owner accepts shm clients but does not dial '" + std::string{address} + "'");
}

auto shm_server::find(link_id link) -> client_ptr {
  std::lock_guard guard{mutex_};
  auto it = clients_.find(link);
  return it == clients_.end() ? nullptr : it->second;
}

void shm_server::wake() noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

std::optional<shm::region_ref> shm_server::in_pool(const shared_bytes& payload) const {
  if (payload.empty()) return std::nullopt;
  for (std::uint32_t i = 0; i < options_.segments.size(); ++i) {
    const auto& s = options_.segments[i];
    if (s.base == nullptr || payload.data() < s.base || payload.data() + payload.size() > s.base + s.size_bytes) {
      continue;
    }
    return shm::region_ref{i, 0, static_cast<std::uint64_t>(payload.data() - s.base), payload.size(), 0};
  }
  return std::nullopt;
}

bool shm_server::write_locked(client& c, const wire::outbound_frame& frame) {
  auto ref = in_pool(frame.payload);
  std::size_t size = sizeof(shm::record_prefix) + frame.head.size() +
                     (ref ? sizeof(shm::region_ref) : frame.payload.size());
  auto room = c.responses->reserve(static_cast<std::uint32_t>(size));
  if (!room) return false;
  std::byte* out = room->data();
  shm::record_prefix prefix{static_cast<std::uint32_t>(ref ? shm::record_kind::frame_by_ref : shm::record_kind::frame), 0};
  std::memcpy(out, &prefix, sizeof prefix);
  out += sizeof prefix;
  if (ref && c.leases.size() >= options_.leases_per_client_max) {
    // Dropped, and the link closes (which ends whatever waited for it).
    if (!c.close_requested.exchange(true)) {
      log_->warn("closing shm link {:#x} from {}: it holds {} values it has not released", c.id, c.peer,
                 c.leases.size());
      wake();
    }
    return true;
  }
  if (ref) {
    // The client reads the payload where it is; keep it alive until it
    // says it is done.
    ref->lease = c.next_lease++;
    c.leases.emplace(ref->lease, frame.payload);
    std::memcpy(out, &*ref, sizeof *ref);
    out += sizeof *ref;
  }
  std::memcpy(out, frame.head.data(), frame.head.size());
  if (!ref && !frame.payload.empty()) std::memcpy(out + frame.head.size(), frame.payload.data(), frame.payload.size());
  c.responses->commit();
  return true;
}

void shm_server::take_releases(client& c, std::span<const std::byte> ids) {
  std::lock_guard guard{c.send_mutex};
  for (std::size_t i = 0; i + 8 <= ids.size(); i += 8) {
    std::uint64_t lease = 0;
    std::memcpy(&lease, ids.data() + i, 8);
    c.leases.erase(lease);  // unknown ids (a confused client) are ignored
  }
}

result<void> shm_server::send(link_id link, wire::outbound_frame frame) {
  auto c = find(link);
  if (!c) return fail(errc::unavailable, fmt::format("shm link {:#x} is not open", link));
  if (auto bad = fits(*c, frame); !bad) return bad;
  std::lock_guard guard{c->send_mutex};
  if (c->closed) return fail(errc::unavailable, fmt::format("shm link {:#x} is closed", link));
  if (c->overflow.empty() && write_locked(*c, frame)) {
    shm::notify_consumer(*c->responses);
    return {};
  }
  if (c->overflow_bytes + frame.size() > limits_.max_queued_bytes) {
    return fail(errc::overloaded, "the client does not read its responses; its queue is full");
  }
  c->overflow_bytes += frame.size();
  c->overflow.push_back(std::move(frame));
  c->has_overflow.store(true, std::memory_order_release);
  wake();
  return {};
}

void shm_server::close(link_id link) {
  if (auto c = find(link)) {
    c->close_requested = true;
    wake();
  }
}

void shm_server::shutdown() {
  std::call_once(shutdown_once_, [this] {
    stopping_ = true;
    wake();
    if (poller_.joinable()) poller_.join();
    std::lock_guard guard{mutex_};
    for (auto& [id, c] : clients_) {
      std::lock_guard send_guard{c->send_mutex};
      c->closed = true;
      shm::close_and_wake(*c->responses);
      shm::close_and_wake(*c->requests);
    }
    clients_.clear();
    listener_.reset();
  });
}

// --- the poller thread -------------------------------------------------------

void shm_server::run() {
  auto idle_since = std::chrono::steady_clock::now();
  auto looked = idle_since;  // the last look at the clock while idle
  // How long this idle spell may spin: as long as spinning pays.
  shm::spin_policy policy{options_.spin};
  std::chrono::nanoseconds budget{0};
  int spins = 0;
  int idle_spins = 0;
  bool slept_unspun = false;  // the last idle spell slept at once (budget 0)
  while (!stopping_) {
    if (serve_all()) {
      if (idle_spins > 0) policy.paid();  // the next request came while we spun
      // A request that came within a full spin of the idle spell's start:
      // spinning would have paid (spin_policy::would_have_paid).
      if (std::exchange(slept_unspun, false) && std::chrono::steady_clock::now() - idle_since <= policy.max()) {
        policy.would_have_paid();
      }
      idle_spins = 0;
      if (++spins % spins_per_event_check == 0) handle_events(0);
      continue;
    }
    // The clock is read now and then only: a spin must stay cheap, it is
    // what a request waits for.
    if (idle_spins++ % spins_per_clock_read == 0) {
      // A reader that spins on this core for the next relayed frame (a
      // handler next to its owner) gets its turn now and then. (A request
      // handed to the node's threads gets one yield, in drain: yielding
      // here for those too cost a time slice per poll on a busy host.)
      if (relayed_since_sleep_) yield_to_readers();
      auto now = std::chrono::steady_clock::now();
      if (idle_spins == 1) {
        idle_since = now;
        looked = now;
        budget = policy.next_budget();
      }
      // Out of budget, or preempted (another thread had the core: on a
      // busy host spinning takes the time of whoever waits for a core).
      auto preempted = shm::spin_policy::preempted(now - looked);
      if (now - idle_since >= budget || preempted) {
        if (budget.count() > 0) policy.wasted(preempted);
        slept_unspun = budget.count() == 0;
        if (options_.on_idle) options_.on_idle();
        sleep_until_work();
        idle_spins = 0;
        continue;
      }
      looked = now;
    }
    cpu_relax();
    if (++spins % spins_per_event_check == 0) handle_events(0);
  }
}

bool shm_server::serve_all() {
  bool progress = false;
  bool closing = false;
  for (auto& c : active_) {
    if (c->close_requested) {
      closing = true;
      continue;
    }
    progress |= drain(*c);
    if (c->has_overflow.load(std::memory_order_acquire)) progress |= flush(*c);
  }
  if (closing) {
    std::vector<client_ptr> gone;
    for (auto& c : active_) {
      if (c->close_requested) gone.push_back(c);
    }
    for (auto& c : gone) drop(c, error{errc::aborted, "closed locally"});
  }
  return progress;
}

bool shm_server::drain(client& c) {
  bool any = false;
  // A frame went from this client to another, or to the node's threads.
  bool handed = false;
  for (int n = 0; n < records_per_turn; ++n) {
    // A client that does not read its answers gets no more until it
    // does: its requests wait in its ring, and once that is full its
    // writes fail with overloaded. So its queue stays within the bound.
    if (over_queue_bound(c)) break;
    auto record = c.requests->peek();
    if (!record) break;
    any = true;
    shm::record_prefix prefix;
    if (record->size() >= sizeof prefix) std::memcpy(&prefix, record->data(), sizeof prefix);
    auto body = record->size() >= sizeof prefix ? record->subspan(sizeof prefix) : std::span<const std::byte>{};
    if (prefix.kind == static_cast<std::uint32_t>(shm::record_kind::release)) {
      take_releases(c, body);
      c.requests->pop();
      continue;
    }
    auto frame = prefix.kind == static_cast<std::uint32_t>(shm::record_kind::frame)
                     ? shm::copy_inbound(body, limits_.frame)
                     : result<wire::inbound_frame>{error{errc::protocol, "a ring record of an unknown kind"}};
    c.requests->pop();
    if (!frame) {
      log_->warn("closing shm link {:#x} from {}: {}", c.id, c.peer, frame.error().to_string());
      c.close_requested = true;
      break;
    }
    if (c.greeted && options_.relay && relay(c.id, *frame, handed)) continue;
    std::optional<wire::message> decoded;
    if (c.greeted && options_.fast_path) {
      if (auto taken = options_.fast_path(c.id, *frame, decoded)) {
        if (!taken->reply) continue;
        auto& reply = taken->reply;
        std::lock_guard guard{c.send_mutex};
        if (!c.closed) queue_or_write(c, std::move(*reply));
        continue;
      }
    }
    c.greeted = true;
    auto taken = decoded ? sink_.on_message(c.id, std::move(*decoded)) : sink_.on_frame(c.id, std::move(*frame));
    if (!taken) {
      log_->warn("closing shm link {:#x} from {}: {}", c.id, c.peer, taken.error().to_string());
      c.close_requested = true;
      break;
    }
    // The node's threads take it from here (an actor's mailbox): on a
    // shared core they run only once this poller lets them.
    handed = true;
  }
  if (c.requests->broken()) {
    log_->warn("closing shm link {:#x} from {}: its request ring is corrupt", c.id, c.peer);
    c.close_requested = true;
  }
  if (any) shm::notify_producer(*c.requests);
  // Whoever takes what we passed on may share this core — a handler next
  // to its owner, reading a relayed call; the node's actor threads,
  // answering a request — asleep or spinning: give it the core now rather
  // than at the end of our time slice, or after a spin that waits for the
  // very answer it would produce (an MQ produce took 2x as long). When it
  // runs elsewhere, this returns at once; on a busy host, where a yield
  // costs a time slice, the policy stops yielding.
  if (handed) yield_to_readers();
  return any;
}

result<void> shm_server::fits(const client& c, const wire::outbound_frame& frame) const {
  // A payload in the pool travels as a reference: only the rest goes
  // through the ring.
  if (in_pool(frame.payload)) return shm::check_outbound({frame.head, {}}, c.responses->record_bytes_max() - 64);
  return shm::check_outbound(frame, c.responses->record_bytes_max() - 64);
}

bool shm_server::over_queue_bound(const client& c) const noexcept {
  return c.overflow_bytes.load(std::memory_order_relaxed) >= limits_.max_queued_bytes;
}

bool shm_server::queue_or_write(client& c, wire::outbound_frame frame) {
  if (c.overflow.empty() && write_locked(c, frame)) return shm::notify_consumer(*c.responses);
  // The poller stops reading a client at the bound (drain), the relay
  // stops passing frames to one (relay) and send() refuses what would
  // cross it, so the one frame that crosses it is the most it is
  // exceeded by.
  SLUICE_ASSERT(c.overflow_bytes.load(std::memory_order_relaxed) <= limits_.max_queued_bytes);
  c.overflow_bytes += frame.size();
  c.overflow.push_back(std::move(frame));
  c.has_overflow.store(true, std::memory_order_release);
  return false;
}

void shm_server::yield_to_readers() {
  if (!yields_.allowed()) return;
  auto before = std::chrono::steady_clock::now();
  ::sched_yield();
  yields_.yielded(std::chrono::steady_clock::now() - before);
}

bool shm_server::relay(link_id from, const wire::inbound_frame& frame, bool& relayed) {
  auto routed = options_.relay(from, frame);
  if (!routed) return false;
  if (routed->to == 0) return true;
  if (link_tag(routed->to) != tag_) {
    // A link of another transport (a caller over TCP): its send takes the
    // frame or queues it for its own thread. A frame it refuses is lost
    // like one to a link that is gone: its caller's deadline answers.
    auto sent = options_.relay_onward ? options_.relay_onward(routed->to, std::move(routed->frame))
                                      : result<void>{error{errc::unavailable, "no route to other transports"}};
    if (!sent) log_->warn("shm link {:#x}: a frame relayed to link {:#x} was dropped: {}", from, routed->to, sent.error().to_string());
    return true;
  }
  auto to = find(routed->to);
  // A reader that is gone is reported down to the node, which answers
  // what was relayed to it.
  if (!to) return true;
  if (auto ok = fits(*to, routed->frame); !ok) {
    log_->warn("shm link {:#x}: a relayed frame was dropped: {}", to->id, ok.error().to_string());
    return true;
  }
  std::lock_guard guard{to->send_mutex};
  if (to->closed) return true;
  // A reader whose queue is full: the frame goes the usual way, where
  // sending it fails with overloaded and the caller is answered so.
  if (over_queue_bound(*to)) return false;
  queue_or_write(*to, std::move(routed->frame));
  relayed = true;
  relayed_since_sleep_ = true;
  return true;
}

bool shm_server::flush(client& c) {
  std::lock_guard guard{c.send_mutex};
  bool any = false;
  while (!c.overflow.empty() && write_locked(c, c.overflow.front())) {
    c.overflow_bytes -= c.overflow.front().size();
    c.overflow.pop_front();
    any = true;
  }
  if (c.overflow.empty()) c.has_overflow.store(false, std::memory_order_release);
  if (any) shm::notify_consumer(*c.responses);
  return any;
}

void shm_server::sleep_until_work() {
  relayed_since_sleep_ = false;
  auto clients = active_;
  for (auto& c : clients) c->requests->consumer_wake_word().store(shm::ring_sleeping, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool ready = false;
  for (auto& c : clients) ready |= c->requests->peek().has_value() || c->close_requested;
  handle_events(ready ? 0 : static_cast<int>(options_.nap.count()));
  for (auto& c : clients) c->requests->consumer_wake_word().store(shm::ring_awake, std::memory_order_relaxed);
}

void shm_server::handle_events(int timeout_ms) {
  epoll_event events[32];
  int n = ::epoll_wait(epoll_fd_.get(), events, 32, timeout_ms);
  for (int i = 0; i < n; ++i) {
    auto key = events[i].data.u64;
    if (key == wake_key) {
      drain_eventfd(wake_fd_.get());
    } else if (key == doorbell_key) {
      drain_eventfd(doorbell_fd_.get());
    } else if (key == listener_key) {
      accept_clients();
    } else if (auto c = find(key)) {
      drop(c, error{errc::unavailable, "the client process closed its connection (it exited or crashed)"});
    }
  }
}

void shm_server::accept_clients() {
  while (true) {
    result<shm::unix_socket> s = error{errc::unavailable, "no listener"};
    {
      std::lock_guard guard{mutex_};
      if (!listener_) return;
      s = listener_->accept();
    }
    if (!s) return;  // timeout: nobody else waiting
    auto c = std::make_shared<client>(std::move(*s));
    if (auto ok = greet(*c); !ok) {
      log_->warn("refusing a shm client: {}", ok.error().to_string());
      continue;
    }
    {
      std::lock_guard guard{mutex_};
      if (clients_.size() >= options_.clients_max) {
        log_->warn("refusing a shm client: {} are connected (clients_max)", clients_.size());
        continue;
      }
      c->id = make_link_id(tag_, next_sequence_++);
      clients_.emplace(c->id, c);
    }
    active_.push_back(c);
    add_to_epoll(epoll_fd_.get(), c->socket.fd(), c->id, EPOLLRDHUP | EPOLLHUP | EPOLLIN);
    sink_.on_link_up(c->id, c->peer);
  }
}

result<void> shm_server::greet(client& c) {
  auto creds = c.socket.peer();
  c.peer = creds ? fmt::format("shm:pid={}", creds->pid) : std::string{"shm:unknown"};
  auto memory = shm::channel_memory::create(options_.ring_bytes);
  if (!memory) return memory.error();
  c.memory = std::move(*memory);
  auto requests = shm::ring::attach(c.memory->requests_area());
  auto responses = shm::ring::attach(c.memory->responses_area());
  if (!requests || !responses) return fail(errc::internal, "fresh rings do not attach");
  c.requests.emplace(std::move(*requests));
  c.responses.emplace(std::move(*responses));
  shm::greeting g{options_.ring_bytes, {}};
  for (auto& s : options_.segments) g.segment_bytes.push_back(s.size_bytes);
  auto bytes = shm::encode_greeting(g);
  int fds[] = {c.memory->fd(), doorbell_fd_.get()};
  if (auto ok = c.socket.send(bytes, fds); !ok) return ok.error();
  for (std::size_t i = 0; i < options_.segments.size(); i += shm::unix_fds_max) {
    std::vector<int> batch;
    for (std::size_t j = i; j < options_.segments.size() && j < i + shm::unix_fds_max; ++j) {
      batch.push_back(options_.segments[j].fd);
    }
    auto count = static_cast<std::uint32_t>(batch.size());
    if (auto ok = c.socket.send(std::as_bytes(std::span{&count, 1}), batch); !ok) return ok.error();
  }
  return {};
}

void shm_server::drop(const client_ptr& c, const error& reason) {
  {
    std::lock_guard guard{mutex_};
    if (clients_.erase(c->id) == 0) return;  // dropped already
  }
  std::erase(active_, c);
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, c->socket.fd(), nullptr);
  std::size_t leases = 0;
  {
    std::lock_guard guard{c->send_mutex};
    c->closed = true;
    shm::close_and_wake(*c->responses);
    // Everything the client was reading in place goes back now.
    leases = c->leases.size();
    c->leases.clear();
  }
  shm::close_and_wake(*c->requests);
  if (leases != 0) log_->debug("shm link {:#x}: released {} leases of a departed client", c->id, leases);
  log_->debug("shm link {:#x} with {} is down: {}", c->id, c->peer, reason.to_string());
  sink_.on_link_down(c->id, reason);
}

}  // namespace sluice::transport
