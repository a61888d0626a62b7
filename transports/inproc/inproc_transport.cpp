#include "transports/inproc/inproc_transport.hpp"

#include <array>
#include <cstdio>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <variant>

#include "runtime/assert.hpp"

namespace sluice::transport {
namespace detail {

struct link_up_event {
  std::string peer;
};
using inproc_event = std::variant<link_up_event, wire::inbound_frame, error>;

// One end of a link: the events for its owner's sink, delivered in order by
// whichever thread finds the end idle. No lock is held while a sink runs.
struct inproc_end {
  // Set before the pipe is shared, then read-only.
  link_id id = 0;
  link_sink* sink = nullptr;  // not owned: the owner's sink, used until `dead`
  wire::frame_limits limits;  // the owner's frame limits
  std::string peer;

  std::mutex mutex;  // guards everything below
  std::condition_variable idle;
  std::deque<inproc_event> events;
  std::uint64_t queued_bytes = 0;  // frame bytes in `events`
  bool draining = false;           // a thread is delivering `events`
  bool down = false;               // on_link_down is queued or delivered; nothing follows it
  bool dead = false;               // the owner shut down: its sink hears nothing more
};

// A link: the connector's end and the acceptor's end.
struct inproc_pipe {
  std::array<inproc_end, 2> ends;  // 0: the connector's, 1: the acceptor's
};

}  // namespace detail

namespace {

using detail::inproc_end;
using detail::inproc_event;
using detail::inproc_pipe;

std::string hex(link_id id) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(id));
  return text;
}

std::uint64_t frame_bytes(const wire::inbound_frame& frame) noexcept {
  return frame.envelope.size() + frame.payload.size();
}

// Queues `reason` as the end's last event, unless it has one already.
void push_down(inproc_end& end, const error& reason) {
  std::lock_guard guard{end.mutex};
  if (end.down) return;
  end.down = true;
  end.events.emplace_back(reason);
}

result<void> push_frame(inproc_end& end, wire::inbound_frame frame, std::uint64_t max_queued_bytes) {
  std::lock_guard guard{end.mutex};
  if (end.down) return fail(errc::unavailable, "inproc link " + hex(end.id) + " is down");
  auto bytes = frame_bytes(frame);
  if (end.queued_bytes + bytes > max_queued_bytes) {
    return fail(errc::overloaded, "the inproc link to " + end.peer + " has " +
                                      std::to_string(end.queued_bytes) + " bytes queued (limit " +
                                      std::to_string(max_queued_bytes) + "); its receiver is slow");
  }
  end.queued_bytes += bytes;
  end.events.emplace_back(std::move(frame));
  return {};
}

void drain(inproc_pipe& pipe, int side, const logger_ptr& log);

// Ends the link on both sides: `mine` for `side`, `theirs` for the other.
void close_pipe(inproc_pipe& pipe, int side, const error& mine, const error& theirs, const logger_ptr& log) {
  push_down(pipe.ends[side], mine);
  push_down(pipe.ends[1 - side], theirs);
  drain(pipe, side, log);
  drain(pipe, 1 - side, log);
}

void deliver(inproc_pipe& pipe, int side, inproc_event event, const logger_ptr& log) {
  auto& end = pipe.ends[side];
  if (auto* up = std::get_if<detail::link_up_event>(&event)) {
    end.sink->on_link_up(end.id, up->peer);
    return;
  }
  if (auto* reason = std::get_if<error>(&event)) {
    end.sink->on_link_down(end.id, *reason);
    return;
  }
  auto accepted = end.sink->on_frame(end.id, std::move(std::get<wire::inbound_frame>(event)));
  if (accepted) return;
  log->warn("closing inproc link {:#x} with {}: {}", end.id, end.peer, accepted.error().to_string());
  close_pipe(pipe, side, accepted.error(),
             error{errc::unavailable, "peer closed the link: " + accepted.error().to_string()}, log);
}

// Delivers the end's queued events in order, unless another thread is
// doing so already (it then delivers what was just queued too). Ends
// because nothing is queued after on_link_down and frames are bounded by
// max_queued_bytes.
void drain(inproc_pipe& pipe, int side, const logger_ptr& log) {
  auto& end = pipe.ends[side];
  std::unique_lock lock{end.mutex};
  if (end.draining) return;
  end.draining = true;
  while (!end.events.empty() && !end.dead) {
    auto event = std::move(end.events.front());
    end.events.pop_front();
    if (auto* frame = std::get_if<wire::inbound_frame>(&event)) end.queued_bytes -= frame_bytes(*frame);
    lock.unlock();
    deliver(pipe, side, std::move(event), log);
    lock.lock();
  }
  end.draining = false;
  end.idle.notify_all();
}

// Fails when the header does not describe the frame's own sizes.
std::optional<error> check_sizes(const wire::outbound_frame& frame) {
  constexpr auto any = std::numeric_limits<std::uint64_t>::max();
  auto header = wire::parse_frame_header(frame.head.span().first<wire::frame_header_bytes>(),
                                         wire::frame_limits{any, any});
  if (header && frame.head.size() == wire::frame_header_bytes + header->envelope_bytes &&
      frame.payload.size() == header->payload_bytes) {
    return std::nullopt;
  }
  return error{errc::invalid_argument, "frame header does not match the frame's envelope and payload sizes"};
}

// The receiver's view of `frame`, sharing its bytes.
wire::inbound_frame to_inbound(const wire::outbound_frame& frame) {
  auto envelope = frame.head.slice(wire::frame_header_bytes, frame.head.size() - wire::frame_header_bytes);
  // Heads from wire::encode are 64-byte aligned, so the envelope words
  // are aligned in place. A head from elsewhere that is not gets its
  // envelope copied: inbound_frame promises 8-byte aligned words.
  if (reinterpret_cast<std::uintptr_t>(envelope.data()) % 8 != 0) {
    envelope = shared_bytes::copy_of(envelope.span());
  }
  return wire::inbound_frame{std::move(envelope), frame.payload};
}

}  // namespace

// ---- inproc_hub -----------------------------------------------------------

result<void> inproc_hub::add(std::string_view name, inproc_transport& t) {
  std::lock_guard guard{mutex_};
  if (listeners_.find(name) != listeners_.end()) {
    return fail(errc::conflict, "the inproc name '" + std::string{name} + "' is taken by another listener");
  }
  if (listeners_.size() >= max_listeners) {
    return fail(errc::overloaded, "the inproc hub holds " + std::to_string(max_listeners) +
                                      " listeners already (inproc_hub::max_listeners)");
  }
  listeners_.emplace(std::string{name}, &t);
  return {};
}

void inproc_hub::remove(std::string_view name, const inproc_transport& t) {
  std::lock_guard guard{mutex_};
  auto it = listeners_.find(name);
  if (it != listeners_.end() && it->second == &t) listeners_.erase(it);
}

void inproc_hub::remove_all(const inproc_transport& t) {
  std::lock_guard guard{mutex_};
  std::erase_if(listeners_, [&t](const auto& item) { return item.second == &t; });
}

result<void> inproc_hub::connect(std::string_view name, const std::shared_ptr<detail::inproc_pipe>& pipe) {
  std::lock_guard guard{mutex_};
  auto it = listeners_.find(name);
  if (it == listeners_.end()) {
    return fail(errc::unavailable, "no inproc listener is named '" + std::string{name} + "'");
  }
  return it->second->accept(pipe);
}

// ---- inproc_transport -----------------------------------------------------

inproc_transport::inproc_transport(std::uint16_t tag, link_sink& sink, inproc_hub& hub, transport_limits limits)
    : tag_(tag), sink_(sink), hub_(hub), limits_(limits), log_(get_logger("inproc")) {}

inproc_transport::~inproc_transport() { shutdown(); }

result<std::string> inproc_transport::listen(std::string_view name) {
  if (name.empty() || name.size() > max_name_bytes) {
    return fail(errc::invalid_argument, "an inproc listener name has 1 to " + std::to_string(max_name_bytes) + " bytes");
  }
  auto shut = [this] {
    std::lock_guard guard{mutex_};
    return closed_;
  };
  if (shut()) return fail(errc::unavailable, "the inproc transport is shut down");
  // The hub's lock is never taken under ours (connect takes hub → ours).
  auto added = hub_.add(name, *this);
  if (!added) return added.error();
  if (shut()) {
    hub_.remove(name, *this);
    return fail(errc::unavailable, "the inproc transport is shut down");
  }
  return std::string{name};
}

result<link_id> inproc_transport::connect(std::string_view name) {
  auto pipe = std::make_shared<inproc_pipe>();
  auto& mine = pipe->ends[0];
  mine.sink = &sink_;
  mine.limits = limits_.frame;
  mine.peer = std::string{name};
  {
    std::lock_guard guard{mutex_};
    if (closed_) return fail(errc::unavailable, "the inproc transport is shut down");
    sweep_locked();
    if (links_.size() >= max_links) {
      return fail(errc::overloaded, "cannot link to '" + mine.peer + "': " + std::to_string(max_links) +
                                        " inproc links are open (inproc_transport::max_links)");
    }
    mine.id = make_link_id(tag_, next_sequence_++);
    links_.emplace(mine.id, entry{});  // holds the slot while the hub is asked
    ++connects_in_flight_;
  }
  auto accepted = hub_.connect(name, pipe);
  {
    std::lock_guard guard{mutex_};
    // shutdown() waits for connects in flight, so the slot is still here.
    if (accepted) {
      links_.at(mine.id).pipe = pipe;
    } else {
      links_.erase(mine.id);
    }
    --connects_in_flight_;
    connects_done_.notify_all();
  }
  if (!accepted) return accepted.error();
  drain(*pipe, 0, log_);
  drain(*pipe, 1, log_);
  return mine.id;
}

result<void> inproc_transport::accept(const std::shared_ptr<detail::inproc_pipe>& pipe) {
  auto& theirs = pipe->ends[0];
  auto& mine = pipe->ends[1];
  std::lock_guard guard{mutex_};
  if (closed_) return fail(errc::unavailable, "the inproc listener '" + theirs.peer + "' is shutting down");
  sweep_locked();
  if (links_.size() >= max_links) {
    return fail(errc::overloaded, "the inproc listener '" + theirs.peer + "' has " +
                                      std::to_string(max_links) + " links open (inproc_transport::max_links)");
  }
  mine.id = make_link_id(tag_, next_sequence_++);
  mine.sink = &sink_;
  mine.limits = limits_.frame;
  mine.peer = "inproc:" + hex(theirs.id);
  // Only the connecting thread (this one) knows the pipe until it is in a
  // map, so the first events go in without the ends' locks, and come
  // before anything another thread may queue later.
  theirs.events.emplace_back(detail::link_up_event{theirs.peer});
  mine.events.emplace_back(detail::link_up_event{mine.peer});
  links_.emplace(mine.id, entry{pipe, 1});
  return {};
}

result<void> inproc_transport::send(link_id link, wire::outbound_frame frame) {
  auto [pipe, side] = find(link);
  if (!pipe) return fail(errc::unavailable, "inproc link " + hex(link) + " is not open");
  if (frame.head.size() < wire::frame_header_bytes) {
    return fail(errc::invalid_argument, "frame head of " + std::to_string(frame.head.size()) +
                                            " bytes is shorter than the frame header");
  }
  auto& to = pipe->ends[1 - side];
  auto header = wire::parse_frame_header(frame.head.span().first<wire::frame_header_bytes>(), to.limits);
  if (!header) {
    log_->warn("closing inproc link {:#x} with {}: {}", link, pipe->ends[side].peer, header.error().to_string());
    close_pipe(*pipe, side, header.error(), header.error(), log_);
    return header.error();
  }
  if (auto bad = check_sizes(frame)) return *bad;
  auto queued = push_frame(to, to_inbound(frame), limits_.max_queued_bytes);
  if (!queued) return queued;
  drain(*pipe, 1 - side, log_);
  return {};
}

void inproc_transport::close(link_id link) {
  auto [pipe, side] = find(link);
  if (!pipe) return;
  close_pipe(*pipe, side, error{errc::aborted, "closed locally"}, error{errc::unavailable, "peer closed the link"},
             log_);
}

void inproc_transport::shutdown() {
  std::call_once(shutdown_once_, [this] { stop(); });
}

void inproc_transport::stop() {
  {
    std::lock_guard guard{mutex_};
    closed_ = true;  // no new links from here on
  }
  hub_.remove_all(*this);
  std::unordered_map<link_id, entry> links;
  {
    std::unique_lock lock{mutex_};
    connects_done_.wait(lock, [this] { return connects_in_flight_ == 0; });
    links.swap(links_);
  }
  for (auto& [id, e] : links) {
    SLUICE_ASSERT(e.pipe != nullptr);
    close_pipe(*e.pipe, e.side, error{errc::aborted, "closed locally: the transport shut down"},
               error{errc::unavailable, "peer closed the link"}, log_);
  }
  // Another thread may still be delivering to our sink; once it is done,
  // nothing reaches the sink again.
  for (auto& [id, e] : links) {
    auto& end = e.pipe->ends[e.side];
    std::unique_lock lock{end.mutex};
    end.idle.wait(lock, [&end] { return !end.draining; });
    end.dead = true;
    end.events.clear();
  }
}

auto inproc_transport::find(link_id link) -> entry {
  if (link_tag(link) != tag_) return {};
  std::lock_guard guard{mutex_};
  auto it = links_.find(link);
  return it == links_.end() ? entry{} : it->second;
}

// Forgets links whose end has delivered its on_link_down, so that the map
// stays within max_links. REQUIRES: mutex_ held.
void inproc_transport::sweep_locked() {
  std::erase_if(links_, [](const auto& item) {
    const entry& e = item.second;
    if (!e.pipe) return false;
    auto& end = e.pipe->ends[e.side];
    std::lock_guard guard{end.mutex};
    return end.down && !end.draining && end.events.empty();
  });
}

}  // namespace sluice::transport
