// rpc_workload: clients serving names and calling each other through the
// real client, owner and master actors (and the owners' relay), under the
// run's faults, every call judged (docs/simulator.md, "RPC"):
//
//  - every call is answered exactly once, and no later than its deadline
//    (plus the time a late timer may take);
//  - a handler runs a call at most once (retries only move calls that were
//    never delivered);
//  - an answer is the one its handler gave for that very call, from a
//    client that served the name in that incarnation — the named client
//    when the call named one;
//  - an error is one the handler gave, or one a call may meet on the way:
//    timeout, unavailable, not_found (no instance), overloaded;
//  - after the faults heal, a call to each served name gets through;
//  - a stream (some calls are, rpc_streams.cpp: both ends drive the client
//    core's stream_server and stream_caller, as the library does, with
//    items that are real dicts) reads its items in order, each once, each
//    the dict its server wrote for that place (stream, place, server and
//    incarnation, bytes made from them); its server never writes more than
//    its window past what was read, nor holds more than its window; it
//    ends once, by its deadline, and ends well only after every item its
//    server planned — otherwise with an error the server gave (after the
//    items it wrote first), a cancel its caller made, or one a stream may
//    meet on the way.
//
// The serving side plays what the client library does over a client's
// own link: it answers calls (now, later, or with an error), and serves
// again when its link breaks or its node restarts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <sluice/dict.hpp>

#include "actors/client/serve_table.hpp"
#include "actors/client/stream_caller.hpp"
#include "sim/checker.hpp"
#include "sim/world.hpp"

namespace sluice::sim {

struct rpc_workload_options {
  /// Names served ("svc0", ...); each client serves each with even odds.
  int names = 3;
  /// Mean pause between two calls of one client.
  sim_duration think = 100ms;
  /// Calls one client keeps in flight at most.
  int outstanding_max = 2;
  /// Deadline of each call.
  sim_duration timeout = 2s;
  /// How often a client looks whether it must serve again.
  sim_duration maintain_every = 250ms;
  /// One call in this many is a stream.
  int stream_one_in = 4;
  /// Most items a stream's server plans to write.
  int stream_items_max = 12;
  /// A planted bug for tests of the stream checks (stream_server_options).
  bool stream_repeats_item = false;
};

class rpc_workload {
 public:
  rpc_workload(world& w, checker& c, rpc_workload_options options = {});
  ~rpc_workload();
  rpc_workload(const rpc_workload&) = delete;
  rpc_workload& operator=(const rpc_workload&) = delete;

  /// Schedules serving and calls until `stop` (the world runs them).
  void start(sim_time stop);
  /// After the faults healed (the KV workload's liveness check heals the
  /// world): a call to every name a live client serves must get through
  /// within `window`. Records violations; returns the names that failed.
  std::vector<std::string> check_liveness(sim_duration window);
  /// Calls answered before their caller was gone must all be answered:
  /// records a violation for any that never were.
  void check_answered();

  std::uint64_t calls() const noexcept { return calls_; }
  /// Calls their serving client answered `overloaded` (past max_concurrent).
  std::uint64_t calls_refused() const noexcept { return calls_refused_; }
  /// Streams opened, and the items read in them.
  std::uint64_t streams() const noexcept { return streams_opened_; }
  std::uint64_t stream_items() const noexcept { return stream_items_; }
  /// Items written by servers (the same items, counted where they start).
  std::uint64_t stream_items_written() const noexcept { return stream_items_written_; }

 private:
  class server;
  /// What a client serves, as the library keeps it: the client core's
  /// serving state (a name's handler is its number; cancels and streams
  /// are tracked apart, below).
  using serving_table = serve_table<int, std::monostate, std::monostate>;
  struct client_state {
    std::uint64_t incarnation = 0;
    int outstanding = 0;
    /// Names this incarnation serves (acknowledged) and serves next.
    std::set<int> serving;
    std::set<int> wanted;
    /// The names this incarnation serves, their admission and limits:
    /// served on sending the serve, unserved on sending the unserve.
    std::optional<serving_table> table;
    bool serve_due = false;
    bool serving_in_flight = false;
  };
  struct call_record {
    int caller = 0;
    std::uint64_t caller_incarnation = 0;
    int name = 0;
    int target = -1;  // a client index, or -1: any
    sim_time started{};
    sim_time deadline{};
    int runs = 0;
    bool answered = false;
    bool handler_failed_it = false;  // the handler answered with an error
  };

  using answer_fn = std::function<void(wire::body, shared_bytes)>;
  /// A stream's item as it travels: an encoded dict (rpc_streams.cpp).
  using stream_item = shared_bytes;
  /// Where an answer to one of a stream's calls goes: the served call's
  /// request id (a cancel of it stops the stream) and its answer.
  struct stream_call {
    std::uint64_t request = 0;
    answer_fn answer;
  };
  /// Both ends run the client core's state machines, as the library does.
  using stream_writer = stream_server<stream_item, stream_call>;
  using stream_reader = stream_caller<stream_item>;

  /// A stream as its caller reads it, and what the checks know of it.
  struct stream_record {
    int caller = 0;
    std::uint64_t caller_incarnation = 0;
    int name = 0;
    int target = -1;
    sim_time deadline{};
    std::int64_t window = 1;
    std::unique_ptr<stream_reader> reader;
    int server = -1;  // known once opened
    std::uint64_t server_incarnation = 0;
    /// Counted here, apart from the state machines: items next() gave,
    /// items the server's writes gave to the stream, pulls answered.
    std::int64_t read = 0;
    std::int64_t written = 0;
    std::set<std::int64_t> answered;
    bool consume_due = false;
    bool cancelled = false;  // the caller gave it up
    bool ended = false;
    // What its server planned (written by the serving side).
    int opens = 0;
    std::int64_t planned = -1;
    bool plan_fails = false;
    std::set<std::int64_t> pulls_seen;
  };
  /// A stream as its server writes it (what a handler of the library does).
  struct serving_stream {
    int client = 0;
    std::uint64_t incarnation = 0;
    std::unique_ptr<stream_writer> writer;
    /// Items the handler writes, then finish() or fail(); or an item that
    /// fails to encode, which ends the stream there.
    std::int64_t planned = 0;
    bool fails = false;
    std::optional<std::int64_t> unencodable_at;
    std::int64_t placed = 0;  // items given a place so far
    bool producing = false;
    bool ended = false;  // finish() or fail() called, or the writer gave up
  };

  void call_stream(int client, int name, int target);
  void stream_opened(std::uint64_t id, const result<wire::message>& reply);
  std::optional<std::int64_t> check_opening(std::uint64_t id, const result<wire::message>& reply);
  void stream_control(std::uint64_t id, std::string_view op, std::int64_t seq,
                      std::function<void(result<wire::message>)> done);
  void reader_work(std::uint64_t id, const stream_caller_work& work);
  void stream_arrived(std::uint64_t id, std::int64_t seq, const result<wire::message>& reply);
  void schedule_consume(std::uint64_t id);
  void stream_consume(std::uint64_t id);
  bool check_item(std::uint64_t id, const stream_item& item);
  void stream_end(std::uint64_t id, std::optional<error> err);
  void serve_stream_call(int client, std::uint64_t incarnation, const wire::message& msg, answer_fn answer);
  void serve_stream_open(int client, std::uint64_t incarnation, const wire::message& msg, const dict_view& args,
                         answer_fn answer);
  void serve_stream_control(int client, std::uint64_t incarnation, const wire::message& msg, const dict_view& args,
                            answer_fn answer);
  void stream_produce(std::uint64_t id);
  void stream_place(std::uint64_t id, std::int64_t seq);
  void stream_encoded(std::uint64_t id, std::int64_t seq, stream_item item);
  void arm_producer(std::uint64_t id);
  void writer_work(std::uint64_t id, stream_writer::work& work);
  void stream_cancelled(int client, std::uint64_t request);
  void streams_lost(int client);
  void check_streams_ended();

  bool current(int client, std::uint64_t incarnation) const;
  client_state& state_of(int client);
  void maintain(int client);
  void serve_wanted(int client);
  void schedule_call(int client);
  void call(int client, int name, int target, std::function<void(bool ok)> then = {});
  void judge(std::uint64_t id, const result<wire::message>& reply);
  void run_call(int client, std::uint64_t incarnation, const wire::message& msg,
                std::function<void(wire::body, shared_bytes)> answer);
  std::string name(int n) const { return "svc" + std::to_string(n); }

  world& world_;
  checker& checker_;
  rpc_workload_options options_;
  std::vector<client_state> clients_;
  std::vector<std::shared_ptr<server>> servers_;
  std::map<std::uint64_t, call_record> records_;
  /// (client, name) → incarnations of the client that served the name.
  std::map<std::pair<int, int>, std::set<std::uint64_t>> served_by_;
  std::map<std::uint64_t, stream_record> streams_;
  std::map<std::uint64_t, serving_stream> serving_streams_;
  /// (client, request id of a watch or pull held) → the stream: a cancel
  /// of it stops the stream.
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> stream_calls_;
  std::uint64_t streams_opened_ = 0;
  std::uint64_t stream_items_ = 0;
  std::uint64_t stream_items_written_ = 0;
  std::uint64_t next_call_ = 1;
  std::uint64_t calls_ = 0;
  std::uint64_t calls_refused_ = 0;
  sim_time stop_{};
  sim_time maintain_until_{};
};

}  // namespace sluice::sim
