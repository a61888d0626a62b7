// rpc_endpoint, the serving side: the link calls come on (a serving
// channel on the owner's host, else the node's own link, whose calls
// node_served runs on a thread of its own), serve and unserve, and
// serving again when that link breaks. What a call does once it arrives:
// rpc_serve_calls.cpp.
#include "api/src/calls.hpp"
#include "api/src/rpc_endpoint_impl.hpp"
#include "runtime/log.hpp"
#include "runtime/rpc_limits.hpp"
#include "transports/shm/shm_client.hpp"

namespace sluice {
namespace {

/// Pause between two attempts to serve again after the owner went away:
/// its restart takes a while, and each attempt costs it a connection.
constexpr std::chrono::milliseconds reserve_interval{500};

}  // namespace

void rpc_endpoint::impl::lost() {
  // Their callers heard of it from their owners; the writers hear now.
  if (serving) stop_streams(*serving, error{errc::unavailable, "the serving client's link to its owner broke"});
  {
    std::lock_guard guard{keeper_mutex};
    link_lost = true;
  }
  keeper_wake.notify_one();
}

bool rpc_endpoint::impl::serve_again() {
  auto link = calls_link();
  if (!link) return false;
  std::vector<served_again> names;
  {
    std::lock_guard guard{serving->mutex};
    names = serving->table.to_serve_again();
  }
  for (auto& serve : names) {
    if (!tell_owner(wire::rpc{wire::rpc_serve{std::move(serve.name), serve.max_concurrent, serve.stream}}, *link)) {
      return false;
    }
  }
  get_logger("rpc")->info("serving {} names again after the link to the owner was lost", names.size());
  return true;
}

void rpc_endpoint::impl::keep() {
  std::unique_lock lock{keeper_mutex};
  while (true) {
    keeper_wake.wait(lock, [this] { return keeper_stop || link_lost; });
    if (keeper_stop) return;
    link_lost = false;
    while (true) {
      if (keeper_wake.wait_for(lock, reserve_interval, [this] { return keeper_stop; })) return;
      lock.unlock();
      bool served = serve_again();
      lock.lock();
      if (served) break;
    }
  }
}

result<std::shared_ptr<call_channel>> rpc_endpoint::impl::serve_channel() {
  std::lock_guard guard{mutex};
  if (!serving) {
    serving = std::make_shared<serve_state>(self);
  }
  std::shared_ptr<call_channel> broken;  // closed once the lock is let go
  std::lock_guard serving_guard{serving->mutex};
  if (serving->channel && serving->channel->usable()) return serving->channel;
  broken = std::move(serving->channel);
  // A raw pointer: the channel's thread is joined before serve_state goes.
  auto* state = serving.get();
  call_channel::hooks hooks{
      [state](wire::message msg) { state->on_frame(state->shared_from_this(), std::move(msg)); },
      [this] { lost(); },
      [state](call_channel::clock::time_point now) { state->expire_streams(now); },
  };
  auto opened = call_channel::open(self->shm_address, client_hello(*self), self->host->shm()->segments(),
                                  std::move(hooks), std::chrono::microseconds{0});
  if (!opened) return opened.error();
  serving->channel = *opened;
  return serving->channel;
}
result<std::shared_ptr<call_channel>> rpc_endpoint::impl::calls_link() {
  if (on_owners_host()) return serve_channel();
  std::lock_guard guard{mutex};
  if (!serving) {
    serving = std::make_shared<serve_state>(self);
  }
  if (!node) {
    node = std::make_shared<node_served>(serving);
    node->on_down = [this] { lost(); };
    self->host->served()->set(node);
  }
  return std::shared_ptr<call_channel>{};
}

result<void> rpc_endpoint::impl::tell_owner(wire::body request, const std::shared_ptr<call_channel>& on) {
  if (!on) {
    // On the node's own link, never a thread's: the owner sends the calls
    // of what a link serves on that link, and the node's is the one read.
    auto [done, future] = promise_callback<wire::message>();
    through_node(*self, std::move(request), {}, self->options.timeout, std::move(done));
    auto reply = wait_for(std::move(future), self->options.timeout);
    if (!reply) return std::move(reply).error();
    return {};
  }
  if (on->thread_id() == std::this_thread::get_id()) {
    return fail(errc::invalid_argument, "serve() and unserve() cannot run inside a handler of the same client");
  }
  auto promise = std::make_shared<std::promise<result<wire::message>>>();
  auto future = promise->get_future();
  wire::envelope env;
  env.source = self->host->id();
  env.body = std::move(request);
  on->request(std::move(env), {}, std::chrono::steady_clock::now() + self->options.timeout,
              [promise](result<wire::message> r) { promise->set_value(std::move(r)); });
  auto reply = future.get();  // the channel answers by the deadline at the latest
  if (!reply) return std::move(reply).error();
  return {};
}
namespace {

served_limits limits_of(const serve_options& options) { return {options.max_concurrent, options.spin}; }

template <class Handler>
served_handler handler_of(Handler h, Handler served_handler::*field) {
  served_handler out;
  out.*field = std::move(h);
  return out;
}

}  // namespace

result<void> rpc_endpoint::serve(std::string_view name, rpc_handler handler, serve_options options) {
  if (!handler) return fail(errc::invalid_argument, "serve() needs a handler");
  return impl_->serve_name(name, handler_of(std::move(handler), &served_handler::sync), served_kind::call,
                           limits_of(options));
}

result<void> rpc_endpoint::serve_async(std::string_view name, rpc_async_handler handler, serve_options options) {
  if (!handler) return fail(errc::invalid_argument, "serve_async() needs a handler");
  return impl_->serve_name(name, handler_of(std::move(handler), &served_handler::async), served_kind::call,
                           limits_of(options));
}

result<void> rpc_endpoint::serve_stream(std::string_view name, rpc_stream_handler handler, serve_options options) {
  if (!handler) return fail(errc::invalid_argument, "serve_stream() needs a handler");
  return impl_->serve_name(name, handler_of(std::move(handler), &served_handler::stream), served_kind::stream,
                           limits_of(options));
}

result<void> rpc_endpoint::impl::serve_name(std::string_view name, served_handler handler, served_kind kind,
                                            served_limits limits) {
  // Checked before a link is made for it.
  if (auto ok = serve_core::check(name, limits); !ok) return ok.error();
  auto channel = calls_link();
  if (!channel) return channel.error();
  {
    std::lock_guard guard{mutex};
    if (!keeper.joinable()) keeper = std::thread([this] { keep(); });
  }
  auto& state = *serving;
  std::shared_ptr<served_name> entry;
  std::chrono::microseconds spin{0};
  {
    std::lock_guard guard{state.mutex};
    auto served = state.table.serve(name, std::move(handler), kind, limits);
    if (!served) return served.error();
    entry = std::move(*served);
    spin = state.table.spin();
  }
  if (*channel) (*channel)->set_spin(spin);
  auto told = tell_owner(
      wire::rpc{wire::rpc_serve{std::string{name}, limits.max_concurrent, kind == served_kind::stream}}, *channel);
  if (!told) {
    std::lock_guard guard{state.mutex};
    state.table.withdraw(entry);
  }
  return told;
}

result<void> rpc_endpoint::unserve(std::string_view name) {
  if (auto ok = check_rpc_name(name); !ok) return ok.error();
  std::shared_ptr<call_channel> channel;
  bool served = false;
  {
    std::lock_guard guard{impl_->mutex};
    if (impl_->serving) {
      std::lock_guard serving_guard{impl_->serving->mutex};
      served = impl_->serving->table.unserve(name);
      if (served) channel = impl_->serving->channel;
    }
  }
  if (!served) return fail(errc::not_found, "this client does not serve '" + std::string{name} + "'");
  return impl_->tell_owner(wire::rpc{wire::rpc_unserve{std::string{name}}}, channel);
}

// --- calls on the node's own link -----------------------------------------------------

/// Calls waiting for the serving thread at most; more are answered
/// `overloaded` at once (the client actor must never block on them).
constexpr std::size_t node_served_queue_max = 65536;
/// How often the serving thread looks for streams past their deadline
/// while no call comes: how late such a stream ends at most.
constexpr std::chrono::milliseconds stream_look_every{10};

node_served::node_served(std::shared_ptr<serve_state> state) : state_(std::move(state)), thread_([this] { run(); }) {}

node_served::~node_served() { stop(); }

void node_served::stop() {
  {
    std::lock_guard guard{mutex_};
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (auto& [call, answer] : queue_) {
    answer(wire::error_reply{errc::unavailable, "the serving client is closing"}, {});
  }
  queue_.clear();
}

void node_served::on_call(wire::message call, answer_fn answer) {
  {
    std::lock_guard guard{mutex_};
    if (!stopping_ && queue_.size() < node_served_queue_max) {
      queue_.emplace_back(std::move(call), std::move(answer));
      wake_.notify_one();
      return;
    }
  }
  answer(wire::error_reply{errc::overloaded, "this client has " + std::to_string(node_served_queue_max) +
                                                 " calls waiting for its handlers already"},
         {});
}

void node_served::on_cancel(std::uint64_t id) { state_->on_cancel(id); }

void node_served::run() {
  while (true) {
    std::pair<wire::message, answer_fn> next;
    {
      std::unique_lock lock{mutex_};
      // Wakes now and then with nothing to do: streams come due.
      wake_.wait_for(lock, stream_look_every, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (next.second) state_->on_call(state_, std::move(next.first), std::move(next.second));
    state_->expire_streams(stream_clock::now());
  }
}

}  // namespace sluice
