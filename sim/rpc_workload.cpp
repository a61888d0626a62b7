#include "sim/rpc_workload.hpp"

#include <caf/send.hpp>

#include <cstring>

#include <fmt/format.h>

#include "actors/client/client.hpp"

namespace sluice::sim {
namespace {

/// How late an answer may come after its deadline: timers fire late at
/// fault sites (timer_delay), and a sweep is one such timer.
constexpr sim_duration answer_slack = 2s;
/// Longest a handler waits before it answers (past the deadline at times).
constexpr std::uint64_t handler_delay_ms_max = 3000;

/// A call's arguments: its id.
shared_bytes args_of(std::uint64_t id) {
  auto buf = byte_buffer::allocate(8);
  std::memcpy(buf.data(), &id, 8);
  return std::move(buf).freeze();
}

/// An answer: the call's id, the serving client and its incarnation.
shared_bytes answer_of(std::uint64_t id, int server, std::uint64_t incarnation) {
  auto buf = byte_buffer::allocate(24);
  auto s = static_cast<std::uint64_t>(server);
  std::memcpy(buf.data(), &id, 8);
  std::memcpy(buf.data() + 8, &s, 8);
  std::memcpy(buf.data() + 16, &incarnation, 8);
  return std::move(buf).freeze();
}

std::uint64_t word(const shared_bytes& b, std::size_t at) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

std::string handler_error(std::uint64_t id) { return fmt::format("sim handler failed call {}", id); }

}  // namespace

/// The serving side of one client node (every incarnation of it).
class rpc_workload::server final : public rpc_served {
 public:
  server(rpc_workload& w, int client) : work_(w), client_(client) {}
  void on_call(wire::message call, answer_fn answer) override {
    auto node = work_.world_.client_index(client_);
    work_.run_call(client_, work_.world_.incarnation(node), call, std::move(answer));
  }
  void on_cancel(std::uint64_t id) override { work_.stream_cancelled(client_, id); }
  void on_link_down() override {
    work_.state_of(client_).serve_due = true;
    work_.streams_lost(client_);
  }

 private:
  rpc_workload& work_;
  int client_;
};

rpc_workload::rpc_workload(world& w, checker& c, rpc_workload_options options)
    : world_(w), checker_(c), options_(options), clients_(static_cast<std::size_t>(w.config().clients)) {
  for (int i = 0; i < static_cast<int>(clients_.size()); ++i) {
    servers_.push_back(std::make_shared<server>(*this, i));
    world_.served_slot(world_.client_index(i)).set(servers_.back());
  }
}

rpc_workload::~rpc_workload() {
  for (int i = 0; i < static_cast<int>(clients_.size()); ++i) world_.served_slot(world_.client_index(i)).set(nullptr);
}

bool rpc_workload::current(int client, std::uint64_t incarnation) const {
  auto node = world_.client_index(client);
  return world_.alive(node) && world_.incarnation(node) == incarnation;
}

rpc_workload::client_state& rpc_workload::state_of(int client) {
  auto& st = clients_[static_cast<std::size_t>(client)];
  auto inc = world_.incarnation(world_.client_index(client));
  if (st.incarnation != inc) {
    // A new incarnation: nothing in flight, nothing served yet.
    auto wanted = std::move(st.wanted);
    st = client_state{};
    st.incarnation = inc;
    st.table.emplace(world_.id_of(world_.client_index(client)).to_string());
    st.wanted = std::move(wanted);
    st.serve_due = true;
  }
  return st;
}

void rpc_workload::start(sim_time stop) {
  stop_ = stop;
  maintain_until_ = stop;
  auto& random = world_.workload_rng();
  for (int c = 0; c < static_cast<int>(clients_.size()); ++c) {
    auto& st = clients_[static_cast<std::size_t>(c)];
    for (int n = 0; n < options_.names; ++n) {
      if (random.chance(1, 2)) st.wanted.insert(n);
    }
    st.serve_due = true;
    world_.at(world_.now(), [this, c] { maintain(c); });
    schedule_call(c);
  }
}

// --- serving ---------------------------------------------------------------------

void rpc_workload::maintain(int client) {
  auto node = world_.client_index(client);
  if (world_.alive(node)) {
    auto& st = state_of(client);
    // Now and then a name is given up, or taken up (serve and unserve race
    // with calls routed to them) — while the workload runs, not after.
    auto& random = world_.workload_rng();
    if (world_.now() < stop_ && random.chance(1, 40)) {
      auto n = static_cast<int>(random.uniform(static_cast<std::uint64_t>(options_.names)));
      if (st.wanted.erase(n) == 0) st.wanted.insert(n);
      st.serve_due = true;
    }
    if (st.serve_due && !st.serving_in_flight) serve_wanted(client);
  }
  if (world_.now() + options_.maintain_every < maintain_until_) {
    world_.at(world_.now() + options_.maintain_every, [this, client] { maintain(client); });
  }
}

void rpc_workload::serve_wanted(int client) {
  auto& st = state_of(client);
  st.serve_due = false;
  st.serving_in_flight = true;
  auto inc = st.incarnation;
  // Names given up first, then every wanted one again (serving twice is
  // harmless: the owner keeps one instance per client and name).
  std::vector<std::pair<bool, int>> steps;
  for (int n = 0; n < options_.names; ++n) {
    if (!st.wanted.contains(n)) steps.emplace_back(false, n);
  }
  for (int n : st.wanted) steps.emplace_back(true, n);
  auto remaining = std::make_shared<int>(static_cast<int>(steps.size()));
  auto failed = std::make_shared<bool>(false);
  for (auto [serve, n] : steps) {
    api_call msg;
    if (serve) {
      auto limits = served_limits{1 + static_cast<std::uint32_t>(world_.workload_rng().uniform(4)), {}};
      // Calls may reach it from now on (the library serves it before it
      // tells the owner).
      auto served = st.table->serve(name(n), n, served_kind::call, limits);
      if (!served) checker_.violation(fmt::format("rpc: client-{} could not serve {}: {}", client, name(n),
                                                  served.error().to_string()));
      msg.request = wire::rpc{wire::rpc_serve{name(n), limits.max_concurrent}};
      served_by_[{client, n}].insert(inc);
    } else {
      (void)st.table->unserve(name(n));
      msg.request = wire::rpc{wire::rpc_unserve{name(n)}};
      st.serving.erase(n);
    }
    msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
    msg.done = [this, client, inc, serve, n, remaining, failed](result<wire::message> reply) {
      if (!current(client, inc)) return;
      auto& st = state_of(client);
      if (!reply) *failed = true;
      if (reply && serve) st.serving.insert(n);
      if (--*remaining == 0) {
        st.serving_in_flight = false;
        if (*failed) st.serve_due = true;  // the next look tries again
      }
    };
    caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(msg));
  }
  if (steps.empty()) st.serving_in_flight = false;
}

void rpc_workload::run_call(int client, std::uint64_t incarnation, const wire::message& msg,
                            std::function<void(wire::body, shared_bytes)> answer) {
  auto& call = std::get<wire::rpc_call>(std::get<wire::rpc>(msg.env.body).body);
  // A call's arguments are its id (8 bytes); a stream's calls carry dicts.
  if (msg.payload.size() != 8) return serve_stream_call(client, incarnation, msg, std::move(answer));
  auto id = word(msg.payload, 0);
  auto it = records_.find(id);
  if (it == records_.end()) {
    checker_.violation(fmt::format("rpc: client-{} got call {}, which nobody made", client, id));
    return answer(wire::error_reply{errc::invalid_argument, "unknown call"}, {});
  }
  auto& rec = it->second;
  if (++rec.runs > 1) checker_.violation(fmt::format("rpc: call {} ran {} times", id, rec.runs));
  if (call.method != name(rec.name)) {
    checker_.violation(fmt::format("rpc: call {} to '{}' reached client-{} as a call to '{}'", id, name(rec.name),
                                   client, call.method));
  }
  // Admitted as the library admits it: not_found when the client no
  // longer serves the name (an unserve raced the call), overloaded past
  // the name's max_concurrent.
  auto& table = *state_of(client).table;
  auto found = table.find(call.method);
  if (!found) return answer(wire::error_reply{found.code(), found.error().message()}, {});
  if (!served_by_[{client, rec.name}].contains(incarnation)) {
    checker_.violation(fmt::format("rpc: client-{} serves '{}' without having told its owner", client, call.method));
  }
  if (auto admitted = table.admit(**found); !admitted) {
    ++calls_refused_;
    return answer(wire::error_reply{admitted.code(), admitted.error().message()}, {});
  }
  // Every answer counts the call down, unless the client restarted since
  // (its table went with it).
  answer = [this, client, incarnation, entry = *found, answer = std::move(answer)](wire::body body,
                                                                                   shared_bytes payload) {
    if (current(client, incarnation)) state_of(client).table->release(*entry);
    answer(std::move(body), std::move(payload));
  };
  auto& random = world_.workload_rng();
  auto roll = random.uniform(100);
  if (roll < 8) {
    rec.handler_failed_it = true;
    return answer(wire::error_reply{errc::invalid_argument, handler_error(id)}, {});
  }
  auto reply = answer_of(id, client, incarnation);
  if (roll < 80) return answer(wire::rpc{wire::rpc_reply{0}}, std::move(reply));
  auto later = sim_duration{std::chrono::milliseconds{random.uniform(handler_delay_ms_max + 1)}};
  world_.at(world_.now() + later, [answer = std::move(answer), reply = std::move(reply)]() mutable {
    answer(wire::rpc{wire::rpc_reply{0}}, std::move(reply));
  });
}

// --- calling -------------------------------------------------------------------------

void rpc_workload::schedule_call(int client) {
  auto mean = static_cast<std::uint64_t>(options_.think.count());
  auto pause = sim_duration{static_cast<sim_duration::rep>(world_.workload_rng().uniform(2 * mean + 1))};
  auto when = world_.now() + pause;
  if (when >= stop_) return;
  world_.at(when, [this, client] {
    auto node = world_.client_index(client);
    if (world_.alive(node) && state_of(client).outstanding < options_.outstanding_max) {
      auto& random = world_.workload_rng();
      auto n = static_cast<int>(random.uniform(static_cast<std::uint64_t>(options_.names)));
      int target = random.chance(1, 4) ? static_cast<int>(random.uniform(clients_.size())) : -1;
      if (random.chance(1, static_cast<std::uint64_t>(options_.stream_one_in))) {
        call_stream(client, n, target);
      } else {
        call(client, n, target);
      }
    }
    schedule_call(client);
  });
}

void rpc_workload::call(int client, int n, int target, std::function<void(bool ok)> then) {
  auto& st = state_of(client);
  auto id = next_call_++;
  ++calls_;
  st.outstanding += 1;
  auto now = world_.now();
  records_.emplace(id, call_record{client, st.incarnation, n, target, now, now + options_.timeout});
  auto& random = world_.workload_rng();
  wire::rpc_call body{name(n), target < 0 ? node_id{} : world_.id_of(world_.client_index(target)),
                      random.chance(1, 3) ? wire::rpc_routing::least_outstanding : wire::rpc_routing::round_robin,
                      0, {}};
  api_call msg;
  msg.request = wire::rpc{std::move(body)};
  msg.payload = args_of(id);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
  auto inc = st.incarnation;
  msg.done = [this, client, inc, id, then = std::move(then)](result<wire::message> reply) {
    if (!current(client, inc)) return;
    state_of(client).outstanding -= 1;
    judge(id, reply);
    if (then) then(reply.ok() && reply->payload.size() == 24);
  };
  caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(msg));
}

void rpc_workload::judge(std::uint64_t id, const result<wire::message>& reply) {
  auto& rec = records_.at(id);
  if (rec.answered) return checker_.violation(fmt::format("rpc: call {} was answered twice", id));
  rec.answered = true;
  if (world_.now() > rec.deadline + answer_slack) {
    checker_.violation(fmt::format("rpc: call {} was answered {:.3f}s after its deadline", id,
                                   seconds(world_.now() - rec.deadline)));
  }
  if (!reply) {
    auto code = reply.code();
    bool expected = code == errc::timeout || code == errc::unavailable || code == errc::not_found ||
                    code == errc::overloaded;
    bool the_handlers = code == errc::invalid_argument && rec.handler_failed_it &&
                        reply.error().message().find(handler_error(id)) != std::string::npos;
    if (!expected && !the_handlers) {
      checker_.violation(fmt::format("rpc: call {} to '{}' failed with {}, which nothing explains", id,
                                     name(rec.name), reply.error().to_string()));
    }
    return;
  }
  auto* rpc = std::get_if<wire::rpc>(&reply->env.body);
  if (rpc == nullptr || !std::holds_alternative<wire::rpc_reply>(rpc->body) || reply->payload.size() != 24) {
    return checker_.violation(fmt::format("rpc: call {} was answered with {} and {} bytes", id,
                                          wire::body_name(reply->env.body), reply->payload.size()));
  }
  auto answered_id = word(reply->payload, 0);
  auto server = static_cast<int>(word(reply->payload, 8));
  auto incarnation = word(reply->payload, 16);
  if (answered_id != id) {
    return checker_.violation(fmt::format("rpc: call {} got the answer to call {}", id, answered_id));
  }
  if (rec.handler_failed_it) {
    checker_.violation(fmt::format("rpc: call {} succeeded though its handler failed it", id));
  }
  if (rec.target >= 0 && server != rec.target) {
    checker_.violation(fmt::format("rpc: call {} named client-{} but client-{} answered it", id, rec.target, server));
  }
  if (!served_by_[{server, rec.name}].contains(incarnation)) {
    checker_.violation(fmt::format("rpc: call {} to '{}' was answered by client-{} (incarnation {}), which did not "
                                   "serve it",
                                   id, name(rec.name), server, incarnation));
  }
}

// --- after the faults ------------------------------------------------------------

std::vector<std::string> rpc_workload::check_liveness(sim_duration window) {
  auto deadline = world_.now() + window;
  maintain_until_ = deadline;
  for (int c = 0; c < static_cast<int>(clients_.size()); ++c) {
    world_.at(world_.now(), [this, c] { maintain(c); });
  }
  // Names some live client wants: after a settling second, each must get
  // a call through (retried) from client 0.
  std::set<int> wanted;
  for (auto& st : clients_) wanted.insert(st.wanted.begin(), st.wanted.end());
  auto reached = std::make_shared<std::set<int>>();
  // Held by the callbacks themselves: some may still be scheduled when
  // this returns.
  auto attempt = std::make_shared<std::function<void(int)>>();
  std::weak_ptr<std::function<void(int)>> again = attempt;
  *attempt = [this, reached, deadline, again](int n) {
    if (world_.now() >= deadline || reached->contains(n)) return;
    call(0, n, -1, [this, reached, n, again](bool ok) {
      if (ok) {
        reached->insert(n);
        return;
      }
      if (auto retry = again.lock()) world_.at(world_.now() + 100ms, [retry, n] { (*retry)(n); });
    });
  };
  for (int n : wanted) world_.at(world_.now() + 1s, [attempt, n] { (*attempt)(n); });
  world_.run_until(deadline);
  std::vector<std::string> stuck;
  for (int n : wanted) {
    if (reached->contains(n)) continue;
    stuck.push_back(name(n));
    checker_.violation(fmt::format("liveness: no call to '{}' got through within {:.0f}s after the faults healed",
                                   name(n), seconds(window)));
  }
  return stuck;
}

void rpc_workload::check_answered() {
  check_streams_ended();
  for (auto& [id, rec] : records_) {
    if (rec.answered || !current(rec.caller, rec.caller_incarnation)) continue;
    if (world_.now() < rec.deadline + answer_slack) continue;
    checker_.violation(fmt::format("rpc: call {} of client-{} was never answered (deadline {})", id, rec.caller,
                                   format_time(rec.deadline)));
  }
}

}  // namespace sluice::sim
