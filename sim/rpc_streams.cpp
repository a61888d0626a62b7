// Streams in the RPC workload: both ends play what the client library
// does (api/src/rpc_stream_*.cpp) over the real client, owner and master
// actors — an opening call, a watch kept open for the stream's life, and
// one pull per item as credit — and every stream is judged when it ends
// (rpc_workload.hpp). Everything runs on the world's clock and rng.
#include <caf/send.hpp>

#include <cstring>

#include <fmt/format.h>

#include "actors/client/client.hpp"
#include "sim/rpc_workload.hpp"

namespace sluice::sim {
namespace {

/// How late a stream may end after its deadline (as for a call's answer).
constexpr sim_duration stream_slack = 2s;
/// Its watch and pulls outlast its deadline by this much (as the library's do).
constexpr sim_duration control_slack = 1s;
/// Most time between two items a server writes, and between two items
/// its caller reads (a slow reader makes its server wait for credit).
constexpr std::uint64_t item_gap_ms_max = 30;
constexpr std::uint64_t read_gap_ms_max = 40;

enum : std::uint64_t { op_watch = 1, op_pull = 2, op_cancel = 3 };

shared_bytes words(std::initializer_list<std::uint64_t> ws) {
  auto buf = byte_buffer::allocate(ws.size() * 8);
  std::size_t at = 0;
  for (auto w : ws) {
    std::memcpy(buf.data() + at, &w, 8);
    at += 8;
  }
  return std::move(buf).freeze();
}

std::uint64_t word_at(const shared_bytes& b, std::size_t i) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + i * 8, 8);
  return v;
}

std::string stream_error(std::uint64_t id) { return fmt::format("sim stream {} failed", id); }

sim_duration gap(rng& random, std::uint64_t ms_max) {
  return sim_duration{std::chrono::milliseconds{random.uniform(ms_max + 1)}};
}

}  // namespace

// --- the calling side --------------------------------------------------------------

void rpc_workload::call_stream(int client, int n, int target) {
  auto& st = state_of(client);
  auto id = next_call_++;
  ++streams_opened_;
  st.outstanding += 1;
  auto& random = world_.workload_rng();
  stream_record rec;
  rec.caller = client;
  rec.caller_incarnation = st.incarnation;
  rec.name = n;
  rec.target = target;
  rec.deadline = world_.now() + options_.timeout;
  rec.window = 1 + static_cast<std::int64_t>(random.uniform(4));
  streams_.emplace(id, rec);
  wire::rpc_call body{name(n), target < 0 ? node_id{} : world_.id_of(world_.client_index(target)),
                      random.chance(1, 3) ? wire::rpc_routing::least_outstanding : wire::rpc_routing::round_robin,
                      0, {}};
  api_call msg;
  msg.request = wire::rpc{std::move(body)};
  msg.payload = words({id, static_cast<std::uint64_t>(rec.window)});
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
  auto inc = st.incarnation;
  msg.done = [this, client, inc, id](result<wire::message> reply) {
    if (current(client, inc)) stream_opened(id, reply);
  };
  caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(msg));
  // The library's next() ends the stream at its deadline.
  world_.at(rec.deadline, [this, id] {
    auto& r = streams_.at(id);
    if (r.ended || !current(r.caller, r.caller_incarnation)) return;
    stream_end(id, error{errc::timeout, "the stream's deadline passed"});
  });
}

void rpc_workload::stream_opened(std::uint64_t id, const result<wire::message>& reply) {
  auto& rec = streams_.at(id);
  if (rec.ended) return;
  if (!reply) return stream_end(id, reply.error());
  if (reply->payload.size() != 24 || word_at(reply->payload, 0) != id) {
    checker_.violation(fmt::format("rpc: stream {} was opened with {} bytes of answer", id, reply->payload.size()));
    return stream_end(id, error{errc::protocol, "a bad opening answer"});
  }
  rec.server = static_cast<int>(word_at(reply->payload, 1));
  rec.server_incarnation = word_at(reply->payload, 2);
  if (rec.target >= 0 && rec.server != rec.target) {
    checker_.violation(fmt::format("rpc: stream {} named client-{} but client-{} opened it", id, rec.target, rec.server));
  }
  if (!served_by_[{rec.server, rec.name}].contains(rec.server_incarnation)) {
    checker_.violation(fmt::format("rpc: stream {} to '{}' was opened by client-{}, which did not serve it", id,
                                   name(rec.name), rec.server));
  }
  stream_control(id, op_watch, 0, [this, id](result<wire::message> r) {
    auto& s = streams_.at(id);
    if (r || s.ended) return;
    s.watch_error = r.error();
    stream_consume(id);
  });
  rec.next_pull = rec.window;
  for (std::int64_t seq = 0; seq < rec.window; ++seq) {
    stream_control(id, op_pull, seq, [this, id, seq](result<wire::message> r) { stream_arrived(id, seq, r); });
  }
}

void rpc_workload::stream_control(std::uint64_t id, std::uint64_t op, std::int64_t seq,
                                  std::function<void(result<wire::message>)> done) {
  auto& rec = streams_.at(id);
  api_call msg;
  msg.request = wire::rpc{wire::rpc_call{name(rec.name), world_.id_of(world_.client_index(rec.server)),
                                         wire::rpc_routing::round_robin, 0, {}}};
  msg.payload = words({id, op, static_cast<std::uint64_t>(seq), 0});
  auto left = std::max(rec.deadline - world_.now(), sim_duration{std::chrono::milliseconds{1}});
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(left + control_slack);
  auto caller = rec.caller;
  auto inc = rec.caller_incarnation;
  msg.done = [this, caller, inc, done = std::move(done)](result<wire::message> reply) {
    if (current(caller, inc)) done(reply);
  };
  caf::anon_send(world_.actor_of(world_.client_index(rec.caller)), api_atom::value, std::move(msg));
}

void rpc_workload::stream_arrived(std::uint64_t id, std::int64_t seq, const result<wire::message>& reply) {
  auto& rec = streams_.at(id);
  if (rec.ended) return;
  if (rec.arrived.contains(seq) || seq < rec.consumed) {
    checker_.violation(fmt::format("rpc: item {} of stream {} was answered twice", seq, id));
    return;
  }
  if (!reply) {
    rec.arrived.emplace(seq, reply.error());
  } else {
    auto* rpc = std::get_if<wire::rpc>(&reply->env.body);
    bool a_reply = rpc != nullptr && std::holds_alternative<wire::rpc_reply>(rpc->body);
    auto& p = reply->payload;
    if (a_reply && p.size() == 0) {
      rec.arrived.emplace(seq, shared_bytes{});
    } else if (!a_reply || p.size() != 32 || word_at(p, 0) != id || word_at(p, 1) != static_cast<std::uint64_t>(seq) ||
               static_cast<int>(word_at(p, 2)) != rec.server || word_at(p, 3) != rec.server_incarnation) {
      checker_.violation(fmt::format("rpc: item {} of stream {} is not the one its server wrote there", seq, id));
      rec.arrived.emplace(seq, error{errc::protocol, "a wrong item"});
    } else {
      rec.arrived.emplace(seq, p);
    }
  }
  if (rec.arrived.size() > static_cast<std::size_t>(rec.window)) {
    checker_.violation(fmt::format("rpc: stream {} holds {} items unread, past its window of {}", id,
                                   rec.arrived.size(), rec.window));
  }
  if (!rec.consume_due) {
    rec.consume_due = true;
    world_.at(world_.now() + gap(world_.workload_rng(), read_gap_ms_max), [this, id] { stream_consume(id); });
  }
}

void rpc_workload::stream_consume(std::uint64_t id) {
  auto& rec = streams_.at(id);
  rec.consume_due = false;
  if (rec.ended || !current(rec.caller, rec.caller_incarnation)) return;
  auto it = rec.arrived.find(rec.consumed);
  if (it == rec.arrived.end()) {
    if (rec.watch_error) stream_end(id, rec.watch_error);
    return;
  }
  auto outcome = std::move(it->second);
  rec.arrived.erase(it);
  if (!outcome) return stream_end(id, outcome.error());
  if (outcome->size() == 0) return stream_end(id, std::nullopt);
  rec.consumed += 1;
  ++stream_items_;
  auto seq = rec.next_pull++;
  stream_control(id, op_pull, seq, [this, id, seq](result<wire::message> r) { stream_arrived(id, seq, r); });
  if (rec.arrived.contains(rec.consumed) || rec.watch_error) {
    rec.consume_due = true;
    world_.at(world_.now() + gap(world_.workload_rng(), read_gap_ms_max), [this, id] { stream_consume(id); });
  }
}

void rpc_workload::stream_end(std::uint64_t id, std::optional<error> err) {
  auto& rec = streams_.at(id);
  rec.ended = true;
  state_of(rec.caller).outstanding -= 1;
  if (world_.now() > rec.deadline + stream_slack) {
    checker_.violation(fmt::format("rpc: stream {} ended {:.3f}s after its deadline", id,
                                   seconds(world_.now() - rec.deadline)));
  }
  if (!err) {
    if (rec.planned < 0 || rec.plan_fails || rec.consumed != rec.planned) {
      checker_.violation(fmt::format("rpc: stream {} ended well after {} items; its server planned {}{}", id,
                                     rec.consumed, rec.planned, rec.plan_fails ? " and a failure" : ""));
    }
    return;
  }
  auto code = err->code();
  if (code == errc::timeout && rec.server >= 0) {
    // As the library does: the serving side hears of it.
    stream_control(id, op_cancel, 0, [](result<wire::message>) {});
  }
  bool on_the_way = code == errc::timeout || code == errc::unavailable || code == errc::not_found ||
                    code == errc::overloaded;
  bool the_servers = code == errc::invalid_argument && rec.plan_fails && rec.consumed == rec.planned &&
                     err->message().find(stream_error(id)) != std::string::npos;
  if (!on_the_way && !the_servers) {
    checker_.violation(fmt::format("rpc: stream {} to '{}' failed after {} items with {}, which nothing explains",
                                   id, name(rec.name), rec.consumed, err->to_string()));
  }
}

void rpc_workload::check_streams_ended() {
  for (auto& [id, rec] : streams_) {
    if (rec.ended || !current(rec.caller, rec.caller_incarnation)) continue;
    if (world_.now() < rec.deadline + stream_slack) continue;
    checker_.violation(fmt::format("rpc: stream {} of client-{} never ended (deadline {})", id, rec.caller,
                                   format_time(rec.deadline)));
  }
}

// --- the serving side --------------------------------------------------------------

void rpc_workload::serve_stream_open(int client, std::uint64_t incarnation, const wire::message& msg,
                                     answer_fn answer) {
  auto id = word_at(msg.payload, 0);
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    checker_.violation(fmt::format("rpc: client-{} got stream {}, which nobody opened", client, id));
    return answer(wire::error_reply{errc::invalid_argument, "unknown stream"}, {});
  }
  auto& rec = it->second;
  if (++rec.opens > 1) checker_.violation(fmt::format("rpc: stream {} was opened {} times", id, rec.opens));
  if (!served_by_[{client, rec.name}].contains(incarnation) || !state_of(client).wanted.contains(rec.name)) {
    return answer(wire::error_reply{errc::not_found, "client does not serve " + name(rec.name)}, {});
  }
  auto& random = world_.workload_rng();
  serving_stream ss;
  ss.client = client;
  ss.incarnation = incarnation;
  auto budget = msg.env.deadline_us == 0 ? options_.timeout
                                         : sim_duration{std::chrono::microseconds{msg.env.deadline_us}};
  ss.deadline = world_.now() + budget;
  ss.window = std::max<std::int64_t>(1, static_cast<std::int64_t>(word_at(msg.payload, 1)));
  ss.granted = ss.window;
  ss.planned = static_cast<std::int64_t>(random.uniform(static_cast<std::uint64_t>(options_.stream_items_max) + 1));
  ss.fails = random.chance(1, 6);
  rec.planned = ss.planned;
  rec.plan_fails = ss.fails;
  ss.producing = true;
  serving_streams_[id] = std::move(ss);
  answer(wire::rpc{wire::rpc_reply{0}}, words({id, static_cast<std::uint64_t>(client), incarnation}));
  world_.at(world_.now() + gap(random, item_gap_ms_max), [this, id] { stream_produce(id); });
}

void rpc_workload::serve_stream_control(int client, std::uint64_t incarnation, const wire::message& msg,
                                        answer_fn answer) {
  auto id = word_at(msg.payload, 0);
  auto op = word_at(msg.payload, 1);
  auto seq = static_cast<std::int64_t>(word_at(msg.payload, 2));
  auto it = serving_streams_.find(id);
  if (it == serving_streams_.end() || it->second.client != client || it->second.incarnation != incarnation ||
      it->second.retired) {
    return answer(wire::error_reply{errc::not_found, "no such stream here"}, {});
  }
  auto& ss = it->second;
  if (op == op_cancel) {
    stream_stop(id);
    return answer(wire::rpc{wire::rpc_reply{0}}, {});
  }
  if (op == op_watch) {
    watches_[{client, msg.env.request_id}] = id;
    ss.watch = std::move(answer);
    return;
  }
  auto& rec = streams_.at(id);
  if (!rec.pulls_seen.insert(seq).second) {
    checker_.violation(fmt::format("rpc: the pull of item {} of stream {} reached its server twice", seq, id));
  }
  if (seq >= ss.granted) ss.granted = seq + 1;
  ss.pulls[seq] = std::move(answer);
  if (!ss.producing && ss.written < ss.planned && ss.written < ss.granted) {
    ss.producing = true;
    world_.at(world_.now() + gap(world_.workload_rng(), item_gap_ms_max), [this, id] { stream_produce(id); });
  }
  stream_settle(id);
}

void rpc_workload::stream_produce(std::uint64_t id) {
  auto& ss = serving_streams_.at(id);
  ss.producing = false;
  if (ss.stopped || ss.retired || !current(ss.client, ss.incarnation)) return;
  if (world_.now() >= ss.deadline) return stream_stop(id);
  // A write takes a credit; without one the writer waits for a pull.
  if (ss.written < ss.planned && ss.written < ss.granted) {
    ss.ready.insert(ss.written++);
    if (ss.ready.size() > static_cast<std::size_t>(ss.window)) {
      checker_.violation(fmt::format("rpc: the server of stream {} holds {} items, past its window of {}", id,
                                     ss.ready.size(), ss.window));
    }
  }
  stream_settle(id);
  if (ss.written < ss.planned && ss.written < ss.granted && !ss.retired) {
    ss.producing = true;
    world_.at(world_.now() + gap(world_.workload_rng(), item_gap_ms_max), [this, id] { stream_produce(id); });
  }
}

void rpc_workload::stream_settle(std::uint64_t id) {
  auto& ss = serving_streams_.at(id);
  bool ended = ss.written == ss.planned;
  for (auto it = ss.pulls.begin(); it != ss.pulls.end();) {
    auto seq = it->first;
    if (ss.ready.erase(seq) > 0) {
      it->second(wire::rpc{wire::rpc_reply{0}},
                 words({id, static_cast<std::uint64_t>(seq), static_cast<std::uint64_t>(ss.client), ss.incarnation}));
    } else if (ss.stopped) {
      it->second(wire::error_reply{errc::timeout, "the stream's deadline passed"}, {});
    } else if (ended && seq >= ss.planned) {
      if (ss.fails) {
        it->second(wire::error_reply{errc::invalid_argument, stream_error(id)}, {});
      } else {
        it->second(wire::rpc{wire::rpc_reply{0}}, {});
      }
      if (seq == ss.planned) ss.end_delivered = true;
    } else {
      ++it;
      continue;
    }
    it = ss.pulls.erase(it);
  }
  if (ss.retired || !(ss.stopped || ss.end_delivered)) return;
  ss.retired = true;
  for (auto& [seq, pull] : ss.pulls) pull(wire::error_reply{errc::not_found, "the stream ended"}, {});
  ss.pulls.clear();
  ss.ready.clear();
  if (ss.watch) std::exchange(ss.watch, {})(wire::rpc{wire::rpc_reply{0}}, {});
}

void rpc_workload::stream_stop(std::uint64_t id) {
  auto& ss = serving_streams_.at(id);
  if (ss.stopped || ss.retired) return;
  ss.stopped = true;
  stream_settle(id);
}

void rpc_workload::stream_cancelled(int client, std::uint64_t request) {
  auto it = watches_.find({client, request});
  if (it == watches_.end()) return;
  auto id = it->second;
  watches_.erase(it);
  auto& ss = serving_streams_.at(id);
  if (ss.client == client && current(client, ss.incarnation)) stream_stop(id);
}

}  // namespace sluice::sim
