// Streams in the RPC workload: both ends drive the client core's state
// machines (actors/client/serve_table.hpp, stream_caller.hpp) as the
// client library does, over the real client, owner and master actors —
// an opening call, a watch kept open for the stream's life, one pull per
// item as credit, a cancel — with items that are real dicts (the FlatDict
// writer), read and checked on the calling side. Every stream is judged
// when it ends (rpc_workload.hpp). Everything runs on the world's clock
// and rng.
#include <caf/send.hpp>

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
/// A caller gives its stream up after an item with these odds; a stream
/// has an item that cannot be encoded with these; an item takes a while
/// to encode (its place reserved meanwhile) with these.
constexpr std::uint64_t cancel_one_in = 60;
constexpr std::uint64_t unencodable_one_in = 10;
constexpr std::uint64_t slow_encoding_one_in = 4;
/// Most bytes in an item's data field.
constexpr std::uint64_t item_data_bytes_max = 300;

// The workload's own fields (the protocol's are stream_field).
constexpr std::string_view field_stream = "sim.stream";
constexpr std::string_view field_seq = "sim.seq";
constexpr std::string_view field_client = "sim.client";
constexpr std::string_view field_incarnation = "sim.incarnation";
constexpr std::string_view field_data = "sim.data";

shared_bytes encode(const dict_builder& d) {
  auto buf = byte_buffer::allocate(d.encoded_size());
  auto ok = d.encode_into(buf.span());
  SLUICE_ASSERT(ok.ok());
  return std::move(buf).freeze();
}

std::optional<std::int64_t> int_field(const dict_view& d, std::string_view name) {
  auto* f = d.find(name);
  if (f == nullptr || !f->as_int64()) return std::nullopt;
  return *f->as_int64();
}

/// The bytes item `seq` of stream `id` carries: both ends can work them out.
std::vector<std::byte> item_data(std::uint64_t id, std::int64_t seq) {
  auto h = mix_seed(id * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(seq));
  std::vector<std::byte> out(h % (item_data_bytes_max + 1));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((h >> (8 * (i % 8))) + i);
  return out;
}

shared_bytes make_item(std::uint64_t id, std::int64_t seq, int client, std::uint64_t incarnation) {
  auto data = item_data(id, seq);
  dict_builder d;
  (void)d.add_int64(field_stream, static_cast<std::int64_t>(id));
  (void)d.add_int64(field_seq, seq);
  (void)d.add_int64(field_client, client);
  (void)d.add_int64(field_incarnation, static_cast<std::int64_t>(incarnation));
  (void)d.add_bytes(field_data, std::span<const std::byte>{data});
  return encode(d);
}

std::string stream_error(std::uint64_t id) { return fmt::format("sim stream {} failed", id); }

sim_duration gap(rng& random, std::uint64_t ms_max) {
  return sim_duration{std::chrono::milliseconds{random.uniform(ms_max + 1)}};
}

/// What a pull's answer says, as the library reads it: an item, the end
/// (a reply without payload), or an error.
result<std::optional<shared_bytes>> pull_outcome(const result<wire::message>& reply) {
  if (!reply) return reply.error();
  auto* rpc = std::get_if<wire::rpc>(&reply->env.body);
  if (rpc == nullptr || !std::holds_alternative<wire::rpc_reply>(rpc->body)) {
    return error{errc::protocol, "a pull answered with " + std::string{wire::body_name(reply->env.body)}};
  }
  if (reply->payload.size() == 0) return std::optional<shared_bytes>{};
  return std::optional<shared_bytes>{reply->payload};
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
  rec.reader = std::make_unique<stream_reader>(stream_caller_options{name(n), rec.window, rec.deadline});
  wire::rpc_call body{name(n), target < 0 ? node_id{} : world_.id_of(world_.client_index(target)),
                      random.chance(1, 3) ? wire::rpc_routing::least_outstanding : wire::rpc_routing::round_robin,
                      0, {}};
  dict_builder args;
  (void)args.add_int64(field_stream, static_cast<std::int64_t>(id));
  (void)args.add_int64(stream_field::window, rec.window);
  streams_.emplace(id, std::move(rec));
  api_call msg;
  msg.request = wire::rpc{std::move(body)};
  msg.payload = encode(args);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
  auto inc = st.incarnation;
  msg.done = [this, client, inc, id](result<wire::message> reply) {
    if (current(client, inc)) stream_opened(id, reply);
  };
  caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(msg));
  // The library's next() ends the stream at its deadline.
  world_.at(streams_.at(id).deadline, [this, id] { stream_consume(id); });
}

void rpc_workload::stream_opened(std::uint64_t id, const result<wire::message>& reply) {
  auto& rec = streams_.at(id);
  if (!reply) {
    rec.reader->broke(reply.error());
    return schedule_consume(id);
  }
  auto stream = check_opening(id, reply);
  if (!stream) {
    rec.reader->broke(error{errc::protocol, "a bad opening answer"});
    return schedule_consume(id);
  }
  stream_caller_work work;
  rec.reader->opened(*stream, work);  // over already (its deadline): the server is told
  reader_work(id, work);
}

std::optional<std::int64_t> rpc_workload::check_opening(std::uint64_t id, const result<wire::message>& reply) {
  auto& rec = streams_.at(id);
  auto args = dict_view::parse(reply->payload.span());
  auto stream = args ? int_field(*args, stream_field::id) : std::nullopt;
  auto server = args ? int_field(*args, field_client) : std::nullopt;
  auto incarnation = args ? int_field(*args, field_incarnation) : std::nullopt;
  if (!stream || *stream != static_cast<std::int64_t>(id) || !server || !incarnation) {
    checker_.violation(fmt::format("rpc: stream {} was opened with {} bytes of answer that do not open it", id,
                                   reply->payload.size()));
    return std::nullopt;
  }
  rec.server = static_cast<int>(*server);
  rec.server_incarnation = static_cast<std::uint64_t>(*incarnation);
  auto* named = args->find(stream_field::server);
  auto server_id = world_.id_of(world_.client_index(rec.server)).to_string();
  if (named == nullptr || !named->as_string() || *named->as_string() != server_id) {
    checker_.violation(fmt::format("rpc: stream {} was opened by client-{}, which gave another id than its own", id,
                                   rec.server));
  }
  if (rec.target >= 0 && rec.server != rec.target) {
    checker_.violation(fmt::format("rpc: stream {} named client-{} but client-{} opened it", id, rec.target, rec.server));
  }
  if (!served_by_[{rec.server, rec.name}].contains(rec.server_incarnation)) {
    checker_.violation(fmt::format("rpc: stream {} to '{}' was opened by client-{}, which did not serve it", id,
                                   name(rec.name), rec.server));
  }
  return stream;
}

void rpc_workload::stream_control(std::uint64_t id, std::string_view op, std::int64_t seq,
                                  std::function<void(result<wire::message>)> done) {
  auto& rec = streams_.at(id);
  dict_builder args;
  (void)args.add_int64(stream_field::id, static_cast<std::int64_t>(id));
  (void)args.add_string(stream_field::op, op);
  (void)args.add_int64(stream_field::seq, seq);
  api_call msg;
  msg.request = wire::rpc{wire::rpc_call{name(rec.name), world_.id_of(world_.client_index(rec.server)),
                                         wire::rpc_routing::round_robin, 0, {}}};
  msg.payload = encode(args);
  auto left = std::max(rec.deadline - world_.now(), sim_duration{std::chrono::milliseconds{1}});
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(left + control_slack);
  auto caller = rec.caller;
  auto inc = rec.caller_incarnation;
  msg.done = [this, caller, inc, done = std::move(done)](result<wire::message> reply) {
    if (current(caller, inc)) done(reply);
  };
  caf::anon_send(world_.actor_of(world_.client_index(rec.caller)), api_atom::value, std::move(msg));
}

void rpc_workload::reader_work(std::uint64_t id, const stream_caller_work& work) {
  if (work.watch) {
    stream_control(id, "watch", 0, [this, id](result<wire::message> r) {
      if (r) return;  // the stream's end: its pulls tell
      streams_.at(id).reader->broke(r.error());
      schedule_consume(id);
    });
  }
  for (auto seq : work.pulls) {
    stream_control(id, "pull", seq, [this, id, seq](result<wire::message> r) { stream_arrived(id, seq, r); });
  }
  if (work.tell_server) stream_control(id, "cancel", 0, [](result<wire::message>) {});
  // work.cancel_calls: the client actor does not say which request ids it
  // gave the calls, so they are not cancelled; their answers are dropped.
}

void rpc_workload::stream_arrived(std::uint64_t id, std::int64_t seq, const result<wire::message>& reply) {
  auto& rec = streams_.at(id);
  if (rec.ended || rec.reader->over()) return;
  if (!rec.answered.insert(seq).second) {
    checker_.violation(fmt::format("rpc: item {} of stream {} was answered twice", seq, id));
    return;
  }
  if (seq < rec.read || seq >= rec.read + rec.window) {
    checker_.violation(fmt::format("rpc: stream {} got item {} with {} read, outside its window of {}", id, seq,
                                   rec.read, rec.window));
    return;
  }
  rec.reader->pull_answered(seq, pull_outcome(reply));
  schedule_consume(id);
}

void rpc_workload::schedule_consume(std::uint64_t id) {
  auto& rec = streams_.at(id);
  if (rec.consume_due || rec.ended) return;
  rec.consume_due = true;
  world_.at(world_.now() + gap(world_.workload_rng(), read_gap_ms_max), [this, id] { stream_consume(id); });
}

void rpc_workload::stream_consume(std::uint64_t id) {
  auto& rec = streams_.at(id);
  rec.consume_due = false;
  if (rec.ended || !current(rec.caller, rec.caller_incarnation)) return;
  stream_caller_work work;
  auto answer = rec.reader->next(world_.now(), work);
  if (!answer) return;  // the next answer has not come: its arrival (or the deadline) reads on
  reader_work(id, work);
  if (!*answer) return stream_end(id, answer->error());
  if (!**answer) return stream_end(id, std::nullopt);
  check_item(id, ***answer);
  rec.read += 1;
  ++stream_items_;
  if (world_.workload_rng().chance(1, cancel_one_in)) {
    // The caller gives the stream up: its server is told.
    rec.cancelled = true;
    stream_caller_work gone;
    rec.reader->cancel(gone);
    reader_work(id, gone);
    return stream_end(id, error{errc::cancelled, "the stream was cancelled"});
  }
  if (rec.reader->ready(world_.now())) schedule_consume(id);
}

bool rpc_workload::check_item(std::uint64_t id, const stream_item& item) {
  auto& rec = streams_.at(id);
  auto d = dict_view::parse(item.span());
  if (!d) {
    checker_.violation(fmt::format("rpc: item {} of stream {} is not a dict: {}", rec.read, id, d.error().message()));
    return false;
  }
  auto stream = int_field(*d, field_stream);
  auto seq = int_field(*d, field_seq);
  auto* data = d->find(field_data);
  if (stream == static_cast<std::int64_t>(id) && seq && *seq < rec.read) {
    checker_.violation(fmt::format("rpc: item {} of stream {} is item {} again: an item delivered twice", rec.read,
                                   id, *seq));
    return false;
  }
  auto want = item_data(id, rec.read);
  bool same_data = data != nullptr && data->as_bytes() &&
                   std::ranges::equal(*data->as_bytes(), std::span<const std::byte>{want});
  if (stream != static_cast<std::int64_t>(id) || seq != rec.read || int_field(*d, field_client) != rec.server ||
      int_field(*d, field_incarnation) != static_cast<std::int64_t>(rec.server_incarnation) || !same_data) {
    checker_.violation(fmt::format("rpc: item {} of stream {} is not the one its server wrote there", rec.read, id));
    return false;
  }
  return true;
}

void rpc_workload::stream_end(std::uint64_t id, std::optional<error> err) {
  auto& rec = streams_.at(id);
  if (rec.ended) return checker_.violation(fmt::format("rpc: stream {} ended twice", id));
  rec.ended = true;
  state_of(rec.caller).outstanding -= 1;
  if (world_.now() > rec.deadline + stream_slack) {
    checker_.violation(fmt::format("rpc: stream {} ended {:.3f}s after its deadline", id,
                                   seconds(world_.now() - rec.deadline)));
  }
  if (!err) {
    if (rec.planned < 0 || rec.plan_fails || rec.read != rec.planned) {
      checker_.violation(fmt::format("rpc: stream {} ended well after {} items; its server planned {}{}", id,
                                     rec.read, rec.planned, rec.plan_fails ? " and a failure" : ""));
    }
    return;
  }
  auto code = err->code();
  bool on_the_way = code == errc::timeout || code == errc::unavailable || code == errc::not_found ||
                    code == errc::overloaded;
  bool the_servers = code == errc::invalid_argument && rec.plan_fails && rec.read == rec.planned &&
                     err->message().find(stream_error(id)) != std::string::npos;
  bool the_callers = code == errc::cancelled && rec.cancelled;
  if (!on_the_way && !the_servers && !the_callers) {
    checker_.violation(fmt::format("rpc: stream {} to '{}' failed after {} items with {}, which nothing explains",
                                   id, name(rec.name), rec.read, err->to_string()));
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

void rpc_workload::serve_stream_call(int client, std::uint64_t incarnation, const wire::message& msg,
                                     answer_fn answer) {
  auto& call = std::get<wire::rpc_call>(std::get<wire::rpc>(msg.env.body).body);
  auto args = dict_view::parse(msg.payload.span());
  if (args && args->find(stream_field::id) != nullptr) {
    return serve_stream_control(client, incarnation, msg, *args, std::move(answer));
  }
  if (args && args->find(stream_field::window) != nullptr) {
    return serve_stream_open(client, incarnation, msg, *args, std::move(answer));
  }
  checker_.violation(fmt::format("rpc: client-{} got a call to '{}' with {} bytes of arguments, neither a call's 8 "
                                 "nor a stream's dict",
                                 client, call.method, msg.payload.size()));
  answer(wire::error_reply{errc::invalid_argument, "bad arguments"}, {});
}

void rpc_workload::serve_stream_open(int client, std::uint64_t incarnation, const wire::message& msg,
                                     const dict_view& args, answer_fn answer) {
  auto id = static_cast<std::uint64_t>(int_field(args, field_stream).value_or(0));
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    checker_.violation(fmt::format("rpc: client-{} got stream {}, which nobody opened", client, id));
    return answer(wire::error_reply{errc::invalid_argument, "unknown stream"}, {});
  }
  auto& rec = it->second;
  if (++rec.opens > 1) checker_.violation(fmt::format("rpc: stream {} was opened {} times", id, rec.opens));
  if (auto found = state_of(client).table->find(name(rec.name)); !found) {
    return answer(wire::error_reply{found.code(), found.error().message()}, {});
  }
  auto& random = world_.workload_rng();
  auto budget = msg.env.deadline_us == 0 ? options_.timeout
                                         : sim_duration{std::chrono::microseconds{msg.env.deadline_us}};
  auto deadline = world_.now() + budget;
  serving_stream ss;
  ss.client = client;
  ss.incarnation = incarnation;
  ss.writer = std::make_unique<stream_writer>(stream_server_options{
      .method = name(rec.name),
      .window = stream_writer::window_for(int_field(args, stream_field::window).value_or(1)),
      .deadline = deadline,
      .plant_repeat_after_credit_race = options_.stream_repeats_item,
  });
  ss.planned = static_cast<std::int64_t>(random.uniform(static_cast<std::uint64_t>(options_.stream_items_max) + 1));
  ss.fails = random.chance(1, 6);
  if (ss.planned > 0 && random.chance(1, unencodable_one_in)) {
    ss.unencodable_at = static_cast<std::int64_t>(random.uniform(static_cast<std::uint64_t>(ss.planned)));
  }
  // What its caller must read: every item before the end, or before the hole.
  rec.planned = ss.unencodable_at.value_or(ss.planned);
  rec.plan_fails = ss.fails || ss.unencodable_at.has_value();
  ss.producing = true;
  serving_streams_[id] = std::move(ss);
  dict_builder opened;
  (void)opened.add_int64(stream_field::id, static_cast<std::int64_t>(id));
  (void)opened.add_string(stream_field::server, world_.id_of(world_.client_index(client)).to_string());
  (void)opened.add_int64(field_client, client);
  (void)opened.add_int64(field_incarnation, static_cast<std::int64_t>(incarnation));
  answer(wire::rpc{wire::rpc_reply{0}}, encode(opened));
  world_.at(world_.now() + gap(random, item_gap_ms_max), [this, id] { stream_produce(id); });
  // A writer waiting for credit gives up at the deadline (write() answers timeout).
  world_.at(deadline, [this, id] {
    auto& s = serving_streams_.at(id);
    if (s.ended || !current(s.client, s.incarnation)) return;
    stream_writer::work work;
    s.writer->expire(world_.now(), work);
    if (s.writer->stopped()) s.ended = true;
    writer_work(id, work);
  });
}

void rpc_workload::serve_stream_control(int client, std::uint64_t incarnation, const wire::message& msg,
                                        const dict_view& args, answer_fn answer) {
  auto id = static_cast<std::uint64_t>(int_field(args, stream_field::id).value_or(0));
  auto* op_field = args.find(stream_field::op);
  auto op = op_field != nullptr && op_field->as_string() ? *op_field->as_string() : std::string_view{};
  auto* seq_field = args.find(stream_field::seq);
  auto seq = seq_field == nullptr ? 0 : seq_field->as_int64() ? *seq_field->as_int64() : -1;
  auto it = serving_streams_.find(id);
  if (it == serving_streams_.end() || it->second.client != client || it->second.incarnation != incarnation ||
      it->second.writer->retired()) {
    return answer(wire::error_reply{errc::not_found, "no such stream here"}, {});
  }
  auto& ss = it->second;
  auto request = msg.env.request_id;
  stream_writer::work work;
  if (op == "cancel") {
    ss.writer->cancel(stream_call{request, std::move(answer)}, world_.now(), work);
  } else if (op == "watch") {
    stream_calls_[{client, request}] = id;
    ss.writer->watch(stream_call{request, std::move(answer)}, work);
  } else if (op == "pull") {
    if (!streams_.at(id).pulls_seen.insert(seq).second) {
      checker_.violation(fmt::format("rpc: the pull of item {} of stream {} reached its server twice", seq, id));
    }
    stream_calls_[{client, request}] = id;
    ss.writer->pull(seq, stream_call{request, std::move(answer)}, work);
  } else {
    checker_.violation(fmt::format("rpc: stream {} got the unknown operation '{}'", id, op));
    return answer(wire::error_reply{errc::invalid_argument, "an unknown stream operation"}, {});
  }
  writer_work(id, work);
  arm_producer(id);
}

void rpc_workload::arm_producer(std::uint64_t id) {
  auto& ss = serving_streams_.at(id);
  if (ss.producing || ss.ended || !current(ss.client, ss.incarnation)) return;
  if (ss.placed < ss.planned && ss.writer->credit() == 0) return;  // it waits for a pull
  ss.producing = true;
  world_.at(world_.now() + gap(world_.workload_rng(), item_gap_ms_max), [this, id] { stream_produce(id); });
}

void rpc_workload::stream_produce(std::uint64_t id) {
  auto& ss = serving_streams_.at(id);
  ss.producing = false;
  if (ss.ended || !current(ss.client, ss.incarnation)) return;
  stream_writer::work work;
  if (ss.placed == ss.planned) {
    ss.ended = true;
    if (ss.fails) {
      ss.writer->fail(error{errc::invalid_argument, stream_error(id)}, work);
    } else {
      ss.writer->finish(work);
    }
    return writer_work(id, work);
  }
  auto place = ss.writer->reserve(world_.now(), work);
  writer_work(id, work);
  if (!place) {
    ss.ended = true;  // the handler's write failed (cancelled, timeout, ...): it gives up
    return;
  }
  if (!*place) return;  // no credit: a pull arms the producer again
  ss.placed += 1;
  stream_place(id, **place);
}

void rpc_workload::stream_place(std::uint64_t id, std::int64_t seq) {
  auto& ss = serving_streams_.at(id);
  if (ss.unencodable_at == seq) {
    ss.ended = true;
    stream_writer::work work;
    ss.writer->unencodable(seq, error{errc::invalid_argument, stream_error(id)}, work);
    return writer_work(id, work);
  }
  auto item = make_item(id, seq, ss.client, ss.incarnation);
  ss.producing = true;  // until the item is written
  auto& random = world_.workload_rng();
  if (!random.chance(1, slow_encoding_one_in)) return stream_encoded(id, seq, std::move(item));
  world_.at(world_.now() + gap(random, item_gap_ms_max),
            [this, id, seq, item = std::move(item)]() mutable { stream_encoded(id, seq, std::move(item)); });
}

void rpc_workload::stream_encoded(std::uint64_t id, std::int64_t seq, stream_item item) {
  auto& ss = serving_streams_.at(id);
  ss.producing = false;
  if (!current(ss.client, ss.incarnation)) return;
  stream_writer::work work;
  auto written = ss.writer->ready(seq, std::move(item), work);
  writer_work(id, work);
  if (!written) {
    ss.ended = true;
    return;
  }
  ++stream_items_written_;
  auto& rec = streams_.at(id);
  rec.written += 1;
  if (rec.written - rec.read > rec.window) {
    checker_.violation(fmt::format("rpc: the server of stream {} wrote {} items while its caller read {}, past its "
                                   "window of {}",
                                   id, rec.written, rec.read, rec.window));
  }
  if (ss.writer->items_held() > static_cast<std::size_t>(ss.writer->window())) {
    checker_.violation(fmt::format("rpc: the server of stream {} holds {} items, past its window of {}", id,
                                   ss.writer->items_held(), ss.writer->window()));
  }
  // The next write, which waits for credit when there is none.
  ss.producing = true;
  world_.at(world_.now() + gap(world_.workload_rng(), item_gap_ms_max), [this, id] { stream_produce(id); });
}

void rpc_workload::writer_work(std::uint64_t id, stream_writer::work& work) {
  auto& ss = serving_streams_.at(id);
  for (auto& a : work.answers) {
    stream_calls_.erase({ss.client, a.to.request});
    switch (a.kind) {
      case stream_answer_kind::item: a.to.answer(wire::rpc{wire::rpc_reply{0}}, std::move(*a.item)); break;
      case stream_answer_kind::end: a.to.answer(wire::rpc{wire::rpc_reply{0}}, {}); break;
      case stream_answer_kind::error: a.to.answer(wire::error_reply{a.err->code(), a.err->message()}, {}); break;
      case stream_answer_kind::done: a.to.answer(wire::rpc{wire::rpc_reply{0}}, encode(dict_builder{})); break;
    }
  }
  work.answers.clear();
  work.dropped.clear();
}

void rpc_workload::stream_cancelled(int client, std::uint64_t request) {
  auto it = stream_calls_.find({client, request});
  if (it == stream_calls_.end()) return;
  auto id = it->second;
  stream_calls_.erase(it);
  auto& ss = serving_streams_.at(id);
  if (ss.client != client || !current(client, ss.incarnation)) return;
  stream_writer::work work;
  ss.writer->call_cancelled(world_.now(), work);
  writer_work(id, work);
}

void rpc_workload::streams_lost(int client) {
  // As the library does when a serving client's link breaks: what it
  // serves is gone from the owner, and its streams stop.
  for (auto& [id, ss] : serving_streams_) {
    if (ss.client != client || !current(client, ss.incarnation) || ss.writer->retired()) continue;
    stream_writer::work work;
    ss.writer->lost(error{errc::unavailable, "the serving client's link to its owner broke"}, work);
    writer_work(id, work);
  }
}

}  // namespace sluice::sim
