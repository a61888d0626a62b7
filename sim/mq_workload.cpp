#include "sim/mq_workload.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include <caf/send.hpp>

#include <fmt/format.h>

#include "actors/client/client.hpp"
#include "actors/common/mq_reply.hpp"
#include "actors/master/mq_groups.hpp"
#include "runtime/assert.hpp"

namespace sluice::sim {
namespace {

struct topic_spec {
  const char* name;
  std::uint32_t partitions;
  std::uint32_t payload_replicas;
  wire::mq_full full = wire::mq_full::block;
};
/// Four topics, one keeping a second copy of each payload, one refusing
/// produces while it is full and one dropping its oldest messages for
/// them; both groups read them all.
constexpr topic_spec topics[] = {
    {"t0", 3, 1}, {"t1", 2, 2}, {"t2", 1, 1, wire::mq_full::reject}, {"t3", 1, 1, wire::mq_full::drop_oldest}};
constexpr const char* groups[] = {"g0", "g1"};
constexpr std::size_t group_count = std::size(groups);
/// Small bounds, so producers of a topic whose groups lag wait for room.
constexpr std::uint64_t partition_messages_max = 6;
constexpr std::uint64_t partition_bytes_max = 48 << 10;
/// Long enough that every retry of a run is deduped.
constexpr std::int64_t dedupe_window_ms = 120'000;
constexpr std::uint32_t prefetch = 4;
/// A message is never dead-lettered within a run: every one must arrive.
constexpr std::uint32_t max_deliveries = 1000;
/// The one partition members replay now and then (seek_time to the
/// start): the order and no-redelivery checks skip it from then on.
constexpr const char* replayed_topic = "t2";
/// Producer ids: the client's index above this (never 0).
constexpr std::uint64_t producer_base = 1000;

wire::mq_topic_config topic_config(const topic_spec& t) {
  wire::mq_topic_config c;
  c.partitions = t.partitions;
  c.max_messages = partition_messages_max;
  c.max_bytes = partition_bytes_max;
  c.full = t.full;
  c.payload_replicas = t.payload_replicas;
  c.dedupe_window_ms = dedupe_window_ms;
  c.dedupe_entries_max = 4096;
  return c;
}

wire::mq_group_config group_config(sim_duration ack_timeout) {
  wire::mq_group_config c;
  for (auto& t : topics) c.topics.emplace_back(t.name);
  c.ack_timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ack_timeout).count();
  c.max_deliveries = max_deliveries;
  c.prefetch = prefetch;
  c.start = wire::mq_start_at::earliest;
  return c;
}

sim_duration between(rng& random, sim_duration lo, sim_duration hi) {
  return lo + sim_duration{static_cast<sim_duration::rep>(random.uniform(static_cast<std::uint64_t>((hi - lo).count()) + 1))};
}

std::int64_t ms_of(sim_duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

mq_workload::mq_workload(world& w, checker& c, mq_workload_options options)
    : world_(w),
      checker_(c),
      options_(options),
      producers_(static_cast<std::size_t>(w.config().clients)),
      members_(static_cast<std::size_t>(w.config().clients) * group_count) {
  for (auto& t : topics) {
    if (t.full == wire::mq_full::drop_oldest) checker_.topic_drops_oldest(t.name);
  }
  for (int client = 0; client < w.config().clients; ++client) {
    for (int g = 0; g < static_cast<int>(group_count); ++g) {
      member_of(client, g).client = client;
      member_of(client, g).group = g;
    }
  }
}

bool mq_workload::current(int client, std::uint64_t incarnation) const {
  auto node = world_.client_index(client);
  return world_.alive(node) && world_.incarnation(node) == incarnation;
}

mq_epochs mq_workload::epochs_now() const {
  return {world_.master_wipes(), world_.master_wipes(), world_.master_epoch(), world_.master_epoch()};
}

void mq_workload::answered(mq_epochs& e) const {
  e.lineage_answered = world_.master_wipes();
  e.epoch_answered = world_.master_epoch();
}

void mq_workload::send(int client, wire::body request, shared_bytes payload, sim_duration timeout, done_fn done) {
  api_call call;
  call.request = std::move(request);
  call.payload = std::move(payload);
  call.timeout = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  call.done = std::move(done);
  caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(call));
}

void mq_workload::start(sim_time stop) {
  stop_ = stop;
  auto& random = world_.workload_rng();
  for (int c = 0; c < static_cast<int>(producers_.size()); ++c) {
    create_topics(c);
    world_.at(world_.now() + between(random, 0ms, options_.produce_think), [this, c] { produce_tick(c); });
    for (int g = 0; g < static_cast<int>(group_count); ++g) {
      auto& m = member_of(c, g);
      m.in = random.chance(2, 3);
      if (m.in) poll_soon(c, g, between(random, 0ms, 200ms));
      world_.at(world_.now() + between(random, 1s, 6s), [this, c, g] { toggle(c, g); });
    }
  }
  // When the faults stop, every member comes in, to drain the topics.
  // A member whose polls ended with its client's crash polls again too
  // (its restarted client joins anew).
  world_.at(stop, [this] {
    for (auto& m : members_) {
      if (!m.in) {
        m.in = true;
        m.phase += 1;
        m.joined = false;
      }
      poll_soon(m.client, m.group, 0ms);
    }
  });
  world_.at(world_.now() + options_.list_every, [this] { list_tick(); });
}

void mq_workload::check_drained(sim_duration window) {
  world_.run_until(world_.now() + window);
  ended_ = true;
  checker_.check_delivered(world_.master_wipes());
  check_freed();
}

void mq_workload::check_freed() {
  // Past the master's orphan grace (and the time a recalled delivery's
  // payload is kept), and two of its sweeps a second apart, every payload
  // no shell names is gone.
  auto grace = std::max(std::chrono::duration_cast<sim_duration>(world_.config().mq_orphan_grace),
                        std::chrono::duration_cast<sim_duration>(std::chrono::milliseconds{master::mq_recall_grace_ms}));
  world_.run_until(world_.now() + grace + 3s);
  // Shared with the callbacks: an answer after the wait below finds them.
  auto payloads = std::make_shared<std::optional<std::uint64_t>>();
  auto shells = std::make_shared<std::optional<std::uint64_t>>();
  auto asker = -1;
  for (int c = 0; c < static_cast<int>(producers_.size()) && asker < 0; ++c) {
    if (world_.alive(world_.client_index(c))) asker = c;
  }
  if (asker < 0) return;  // no client left to ask (a run without clients)
  send(asker, wire::count_keys{"~mq/"}, {}, options_.timeout, [payloads](result<wire::message> reply) {
    if (auto counted = reply_body<wire::count_keys_reply>(reply)) *payloads = counted->count;
  });
  // A few of them by name, for the report.
  auto named = std::make_shared<std::vector<std::string>>();
  send(asker, wire::list_keys{"~mq/", "", 3}, {}, options_.timeout, [named](result<wire::message> reply) {
    if (auto listed = reply_body<wire::list_keys_reply>(reply)) {
      for (auto& k : listed->keys) named->push_back(k.key);
    }
  });
  send(asker, wire::mq{wire::mq_list_topics{}}, {}, options_.timeout, [shells](result<wire::message> reply) {
    auto listed = mq_reply<wire::mq_topics>(reply);
    if (!listed) return;
    std::uint64_t held = 0;
    for (auto& t : listed->topics) {
      for (auto& p : t.partitions) held += p.end - p.start;
    }
    *shells = held;
  });
  world_.run_until(world_.now() + options_.timeout + 1s);
  checker_.check_freed(*payloads, *shells, *named);
}

// --- producing ---------------------------------------------------------------------

mq_workload::producer& mq_workload::producer_of(int client) {
  auto& p = producers_[static_cast<std::size_t>(client)];
  auto inc = world_.incarnation(world_.client_index(client));
  if (p.incarnation != inc) {
    // A new incarnation: nothing in flight; the ids go on, as a process
    // restarted under the same producer name does.
    p.incarnation = inc;
    p.busy = false;
  }
  return p;
}

void mq_workload::create_topics(int client) {
  if (!world_.alive(world_.client_index(client))) return;
  for (auto& t : topics) {
    // Answered `created` or not: both mean the topic is there now.
    send(client, wire::mq{wire::mq_create_topic{t.name, topic_config(t)}}, {}, options_.timeout,
         [](result<wire::message>) {});
  }
}

void mq_workload::produce_tick(int client) {
  auto& random = world_.workload_rng();
  auto next = world_.now() + between(random, 0ms, 2 * options_.produce_think);
  if (next < stop_) world_.at(next, [this, client] { produce_tick(client); });
  if (!world_.alive(world_.client_index(client))) return;
  auto& p = producer_of(client);
  if (p.busy) return;
  p.busy = true;
  produce_job job;
  job.client = client;
  job.incarnation = p.incarnation;
  job.topic = static_cast<int>(random.uniform(std::size(topics)));
  job.message = {producer_base + static_cast<std::uint64_t>(client), p.next_id++};
  job.started = world_.now();
  job.epochs = epochs_now();
  produce_attempt(std::move(job));
}

void mq_workload::produce_attempt(produce_job job) {
  if (!current(job.client, job.incarnation)) return;
  auto& t = topics[job.topic];
  // A fresh payload key each attempt, as the library's producer makes one.
  auto key = fmt::format("~mq/{}/c{}/{}", t.name, job.client, next_payload_++);
  checker_.payload_written(key, t.name, job.message);
  job.attempt += 1;
  send(job.client, wire::kv_put{key, {}, 0, t.payload_replicas, ""}, mq_payload(job.message), options_.timeout,
       [this, job, key](result<wire::message> reply) mutable {
         if (!current(job.client, job.incarnation)) return;
         auto put = reply_body<wire::kv_put_reply>(reply);
         if (!put) return produce_failed(std::move(job), {}, put.error());
         produce_append(std::move(job), key);
       });
}

void mq_workload::produce_append(produce_job job, std::string key) {
  auto& t = topics[job.topic];
  auto id = job.message.id;
  wire::mq_message msg{key, mq_payload_size(job.message), std::to_string(id), {}, false, 0};
  // A third by key, a third to a partition named, a third round robin.
  if (id % 3 == 0) msg.key = fmt::format("k{}", id % 5);
  if (id % 3 == 1) {
    msg.has_partition = true;
    msg.partition = static_cast<std::uint32_t>(id % t.partitions);
  }
  wire::mq_produce p{t.name, job.message.producer, {std::move(msg)}};
  job.epochs.epoch_sent = world_.master_epoch();
  send(job.client, wire::mq{std::move(p)}, {}, options_.timeout,
       [this, job, key](result<wire::message> reply) mutable {
         if (!current(job.client, job.incarnation)) return;
         answered(job.epochs);
         auto done = mq_reply<wire::mq_produced>(reply);
         if (done && done->results.size() != 1) {
           done = error{errc::protocol, "a produce of one message answered " + std::to_string(done->results.size())};
         }
         if (!done) return produce_failed(std::move(job), key, done.error());
         auto& r = done->results.front();
         if (r.code != errc::ok) {
           checker_.produce_refused(topics[job.topic].name, r.code, r.message);
           return produce_failed(std::move(job), key, error{r.code, r.message});
         }
         checker_.produce_acked(topics[job.topic].name, job.message, r, job.started, job.epochs);
         producer_of(job.client).busy = false;
       });
}

void mq_workload::produce_failed(produce_job job, const std::string& key, const error& e) {
  // As the library does: a payload not appended is removed, unless the
  // append may still have happened (a timeout).
  if (!key.empty() && e.code() != errc::timeout) {
    send(job.client, wire::kv_remove{key, 0}, {}, options_.timeout, [](result<wire::message>) {});
  }
  if (e.code() == errc::not_found) create_topics(job.client);  // the master lost it (a wiped disk)
  if (job.attempt >= options_.produce_attempts_max || world_.now() >= stop_) {
    producer_of(job.client).busy = false;
    return;
  }
  world_.at(world_.now() + 50ms, [this, job = std::move(job)]() mutable { produce_attempt(std::move(job)); });
}

// --- consuming ---------------------------------------------------------------------

bool mq_workload::stale(const member& m, std::uint64_t incarnation, std::uint64_t phase) const {
  return !current(m.client, incarnation) || m.incarnation != incarnation || m.phase != phase;
}

void mq_workload::toggle(int client, int group) {
  if (world_.now() >= stop_) return;  // from now on every member stays in
  auto& random = world_.workload_rng();
  auto& m = member_of(client, group);
  m.phase += 1;
  sim_duration next;
  if (m.in) {
    m.in = false;
    // Two times in three it leaves; else it "crashes": it stops polling
    // and acking, and its lease lapses.
    auto node = world_.client_index(client);
    if (m.joined && world_.alive(node) && world_.incarnation(node) == m.incarnation && random.chance(2, 3)) {
      send(client, wire::mq{wire::mq_leave{groups[group], 0}}, {}, options_.timeout, [](result<wire::message>) {});
    }
    m.joined = false;
    next = between(random, 500ms, 3s);
  } else {
    m.in = true;
    m.joined = false;
    poll_soon(client, group, 0ms);
    next = between(random, 2s, 8s);
  }
  world_.at(world_.now() + next, [this, client, group] { toggle(client, group); });
}

void mq_workload::poll_soon(int client, int group, sim_duration after) {
  auto& m = member_of(client, group);
  if (m.poll_scheduled) return;
  m.poll_scheduled = true;
  world_.at(world_.now() + after, [this, client, group] {
    member_of(client, group).poll_scheduled = false;
    poll(client, group);
  });
}

void mq_workload::poll(int client, int group) {
  if (ended_) return;
  auto& m = member_of(client, group);
  if (!m.in) return;
  auto node = world_.client_index(client);
  if (!world_.alive(node)) return poll_soon(client, group, 250ms);
  if (m.incarnation != world_.incarnation(node)) {
    // It restarted: it joins again; what it held goes out again.
    m.incarnation = world_.incarnation(node);
    m.phase += 1;
    m.joined = false;
    m.polling = false;
  }
  if (m.polling) return;
  if (!m.joined) return join(client, group);
  m.polling = true;
  auto& random = world_.workload_rng();
  mq_poll_record record{groups[group], world_.id_of(node).value, world_.now(), epochs_now()};
  // Counted as the library's consumer counts them (api/src/mq.cpp).
  auto seq = ++m.polls;
  wire::mq_poll p{groups[group], 0, 1 + static_cast<std::uint32_t>(random.uniform(prefetch)), 0,
                  static_cast<std::uint64_t>(ms_of(options_.poll_wait)), seq, m.answered, {}};
  // The acks riding on this poll, as the library's ack_and_poll sends
  // them; those made before the member last went out or restarted are
  // not its to send.
  for (auto& [s, made_in] : m.riding) {
    if (made_in == m.phase) p.settles.push_back(std::move(s));
  }
  m.riding.clear();
  auto acks = p.settles;
  auto lineage = world_.master_wipes();
  auto epoch = world_.master_epoch();
  auto inc = m.incarnation;
  auto phase = m.phase;
  send(client, wire::mq{std::move(p)}, {}, options_.poll_wait + options_.timeout,
       [this, client, group, inc, phase, record, seq, acks = std::move(acks), lineage,
        epoch](result<wire::message> reply) mutable {
         if (!current(client, inc)) return;
         auto& m = member_of(client, group);
         if (m.incarnation != inc) return;
         m.polling = false;
         answered(record.epochs);
         auto polled = mq_reply<wire::mq_polled>(reply);
         if (polled) m.answered = std::max(m.answered, seq);
         // A poll answered with deliveries or none applied every ack it
         // carried; a refused one may have applied some: none is counted.
         if (polled && world_.master_wipes() == lineage) {
           for (auto& a : acks) {
             checker_.ack_completed(groups[group], lineage, a.partition, a.offset, world_.now(), epoch);
           }
         }
         if (!polled) {
           // Not a member (the master forgot it, or its lease lapsed): join again.
           if (polled.code() == errc::not_found) m.joined = false;
           return poll_soon(client, group, 100ms);
         }
         this->polled(m, phase, record, std::move(*polled));
         poll_soon(client, group, 0ms);
       });
}

void mq_workload::join(int client, int group) {
  auto& m = member_of(client, group);
  m.polling = true;
  auto inc = m.incarnation;
  auto epochs = epochs_now();
  wire::mq_join j{groups[group], 0, group_config(options_.ack_timeout), static_cast<std::uint64_t>(ms_of(options_.lease))};
  send(client, wire::mq{std::move(j)}, {}, options_.timeout,
       [this, client, group, inc, epochs](result<wire::message> reply) mutable {
         if (!current(client, inc)) return;
         auto& m = member_of(client, group);
         if (m.incarnation != inc) return;
         m.polling = false;
         answered(epochs);
         auto joined = mq_reply<wire::mq_joined>(reply);
         if (!joined) {
           if (joined.code() == errc::not_found) create_topics(client);  // the master lost them (a wiped disk)
           return poll_soon(client, group, 200ms);
         }
         if (epochs.lineage_sent == epochs.lineage_answered) {
           checker_.group_joined(groups[group], epochs.lineage_answered, world_.now());
         }
         m.joined = true;
         poll_soon(client, group, 0ms);
       });
}

void mq_workload::polled(member& m, std::uint64_t phase, const mq_poll_record& record, wire::mq_polled p) {
  auto client = m.client;
  auto group = m.group;
  auto inc = m.incarnation;
  auto& random = world_.workload_rng();
  bool replay = false;
  for (auto& d : p.deliveries) replay = replay || d.partition.topic == replayed_topic;
  if (replay && world_.now() < stop_ && random.chance(1, 8)) seek_start(client, group);
  for (auto& d : p.deliveries) {
    auto message = checker_.delivered(record, d);
    if (!message) {
      settle(client, group, phase, std::move(d));
      continue;
    }
    // Read the payload as the library's poll does, then settle it.
    auto key = d.payload;
    send(client, wire::kv_get{key}, {}, options_.timeout,
         [this, client, group, inc, phase, key, msg = *message, d = std::move(d)](result<wire::message> reply) mutable {
           if (!current(client, inc)) return;
           auto got = reply_body<wire::kv_get_reply>(reply);
           checker_.payload_read(key, msg, got ? result<shared_bytes>{reply->payload} : result<shared_bytes>{got.error()});
           auto delay = between(world_.workload_rng(), 0ms, 200ms);
           world_.at(world_.now() + delay, [this, client, group, phase, d = std::move(d)]() mutable {
             settle(client, group, phase, std::move(d));
           });
         });
  }
}

void mq_workload::settle(int client, int group, std::uint64_t phase, wire::mq_delivery d) {
  auto& m = member_of(client, group);
  if (stale(m, m.incarnation, phase) || !m.in) return;  // it left or "crashed": it never settles
  auto& random = world_.workload_rng();
  // While the faults run: most are acked, some nacked, some left to their
  // ack deadline. Afterwards every delivery is acked.
  auto roll = world_.now() < stop_ ? random.uniform(100) : 0;
  if (roll >= 85) return;
  bool ack = roll < 70;
  // A quarter of the acks settle everything of the partition the member
  // holds up to this offset (its earlier deliveries, read or not).
  bool upto = ack && random.chance(1, 4);
  wire::mq_settle s;
  s.group = groups[group];
  s.kind = upto ? wire::mq_settle_kind::ack_upto : ack ? wire::mq_settle_kind::ack : wire::mq_settle_kind::nack;
  s.partition = d.partition;
  s.offset = d.offset;
  s.generation = d.generation;
  if (upto) s.answered_seq = m.answered;
  if (!ack) s.delay_ms = static_cast<std::int64_t>(random.uniform(300));
  // A third of the plain acks ride on the member's next poll instead.
  if (ack && !upto && m.riding.size() < wire::mq_poll_settles_max && random.chance(1, 3)) {
    s.group.clear();  // the poll's
    m.riding.emplace_back(std::move(s), phase);
    return;
  }
  auto lineage = world_.master_wipes();
  auto epoch = world_.master_epoch();
  auto inc = m.incarnation;
  send(client, wire::mq{std::move(s)}, {}, options_.timeout,
       [this, client, group, inc, ack, upto, lineage, epoch, d = std::move(d)](result<wire::message> reply) {
         if (!current(client, inc)) return;
         auto settled = mq_reply<wire::mq_settled>(reply);
         if (!settled) return;  // refused (moved, expired) or lost: it goes out again
         if (!ack) return checker_.nacked();
         // Which offsets an ack_upto settled the answer does not say (this
         // one may have gone to another member meanwhile): it is judged by
         // what is delivered after, not by (d).
         if (upto) return checker_.acked_upto();
         if (world_.master_wipes() != lineage) return;
         checker_.ack_completed(groups[group], lineage, d.partition, d.offset, world_.now(), epoch);
       });
}

void mq_workload::seek_start(int client, int group) {
  // From the first message the partition holds: nothing is skipped, what
  // the group acked there comes again.
  checker_.seek_sent(groups[group], world_.master_wipes(), replayed_topic);
  wire::mq_seek s{groups[group], {replayed_topic, 0}, true, 0, 0};
  send(client, wire::mq{std::move(s)}, {}, options_.timeout, [this](result<wire::message> reply) {
    if (reply_body<wire::ok_reply>(reply)) checker_.seeked();
  });
}

// --- bounds ---------------------------------------------------------------------

void mq_workload::list_tick() {
  if (ended_) return;
  world_.at(world_.now() + options_.list_every, [this] { list_tick(); });
  for (int c = 0; c < static_cast<int>(producers_.size()); ++c) {
    auto node = world_.client_index(c);
    if (!world_.alive(node)) continue;
    auto inc = world_.incarnation(node);
    send(c, wire::mq{wire::mq_list_topics{}}, {}, options_.timeout, [this, c, inc](result<wire::message> reply) {
      if (!current(c, inc)) return;
      auto listed = mq_reply<wire::mq_topics>(reply);
      if (listed) checker_.topics_listed(*listed, world_.now());
    });
    send(c, wire::count_keys{"~mq/"}, {}, options_.timeout, [this, c, inc](result<wire::message> reply) {
      if (!current(c, inc)) return;
      if (auto counted = reply_body<wire::count_keys_reply>(reply)) checker_.payloads_counted(counted->count);
    });
    return;
  }
}

}  // namespace sluice::sim
