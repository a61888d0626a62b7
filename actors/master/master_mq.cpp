// MQ on the master (docs/mq.md): topics, produces, consumer groups, long
// polls and producers waiting for room. The bookkeeping is mq_log's and
// mq_groups'; this file ties them to the rest of the master: it checks
// each payload against the directory, pins it while a shell names it and
// frees it once the shell is gone, journals every change, parks polls and
// produces, and wakes them on appends, acks and rebalances — never on a
// timer, except to end a wait at its deadline.
//
// Payload keys: a producer writes a message's payload as an object under
// `~mq/<topic>/...` before it produces. The master accepts no other key
// for a topic, so consuming a topic can never free a user's object.

#include <algorithm>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/master/master_state.hpp"
#include "runtime/assert.hpp"
#include "runtime/overloaded.hpp"

namespace sluice::master_detail {
namespace {

using master::mq_member_id;

/// A parked request is answered this long before its requester's
/// deadline, so the answer still finds it waiting.
constexpr clock_duration answer_margin = std::chrono::milliseconds{100};
/// The lease a member gets when its join names none.
constexpr std::int64_t default_lease_ms = 10'000;
/// The longest lease a member may ask for.
constexpr std::int64_t max_lease_ms = 3'600'000;

std::string payload_prefix(std::string_view topic) { return "~mq/" + std::string{topic} + "/"; }

master::mq_topic_config core_config(const wire::mq_topic_config& w) {
  master::mq_topic_config c;
  c.partitions = w.partitions;
  c.max_age_ms = w.max_age_ms;
  c.max_bytes = w.max_bytes;
  c.max_messages = w.max_messages;
  c.full = static_cast<master::mq_full_policy>(w.full);
  c.payload_replicas = w.payload_replicas;
  if (w.max_message_bytes != 0) c.max_message_bytes = w.max_message_bytes;
  if (c.max_bytes != 0) c.max_message_bytes = std::min(c.max_message_bytes, c.max_bytes);
  c.dedupe_window_ms = w.dedupe_window_ms;
  c.dedupe_entries_max = w.dedupe_entries_max;
  if (c.dedupe_window_ms > 0 && c.dedupe_entries_max == 0) c.dedupe_entries_max = 4096;
  c.dead_letter = w.dead_letter;
  return c;
}

wire::mq_topic_config wire_config(const master::mq_topic_config& c) {
  return {c.partitions, c.max_age_ms,       c.max_bytes,        c.max_messages,      static_cast<wire::mq_full>(c.full),
          c.payload_replicas, c.max_message_bytes, c.dedupe_window_ms, c.dedupe_entries_max, c.dead_letter};
}

master::mq_group_config core_group(const wire::mq_group_config& w) {
  master::mq_group_config c;
  c.topics = w.topics;
  std::sort(c.topics.begin(), c.topics.end());
  c.topics.erase(std::unique(c.topics.begin(), c.topics.end()), c.topics.end());
  if (w.ack_timeout_ms != 0) c.ack_timeout_ms = w.ack_timeout_ms;
  if (w.max_deliveries != 0) c.max_deliveries = w.max_deliveries;
  if (w.prefetch != 0) c.prefetch = w.prefetch;
  c.start = static_cast<master::mq_start>(w.start);
  return c;
}

void reply_mq(self_ptr self, const request_context& ctx, wire::mq_body body) {
  answer(self, ctx, wire::mq{std::move(body)});
}

/// Writes what the logs and groups changed to the store.
void journal(self_ptr self) {
  auto& st = self->state;
  auto log = st.mq.drain_changes();
  auto groups = st.mq_groups.drain_changes();
  if (log.empty() && groups.empty()) return;
  st.journal->mq_changed(log, groups);
  changed(self);
}

void arm_timer(self_ptr self, clock_time at) {
  auto& st = self->state;
  if (st.mq_timer_at && *st.mq_timer_at <= at) return;
  st.mq_timer_at = at;
  auto id = st.next_waiting++;
  st.waiting.emplace(id, [self] { mq_tick(self); });
  auto now = st.ep->now();
  self->delayed_send(self, at > now ? at - now : clock_duration{0}, resume_atom::value, id);
}

/// Keeps `key` from eviction while a shell names it.
void pin_payload(self_ptr self, const std::string& key) {
  auto& st = self->state;
  st.pins.pin(key, st.ep->me().id, 0, master::pinned_forever);
  pins_changed(self, {key});
}

/// No shell names `key` any more: the object goes, once no member it was
/// recalled from may still be reading it.
void free_payload(self_ptr self, const std::string& key) {
  auto& st = self->state;
  // Unpinned at once: a master that restarts before a recalled payload's
  // time is up leaves it to the orphan sweep, which skips pinned keys.
  if (st.pins.unpin(key, 0, st.wall_ms())) pins_changed(self, {key});
  if (auto r = st.mq_recalled.find(key); r != st.mq_recalled.end() && r->second.until_ms > st.wall_ms()) {
    r->second.freed = true;  // mq_tick frees it when the time comes
    return;
  }
  auto* entry = st.dir.find_any(key);
  if (entry == nullptr) return;
  if (st.expiring.insert(key).second) expire_key(self, key, entry->version);
}

void free_payloads(self_ptr self, const std::vector<std::string>& keys) {
  for (auto& k : keys) free_payload(self, k);
}

void wake_members(self_ptr self, const std::vector<mq_member_id>& members);
void grew(self_ptr self, const std::string& topic, const std::set<std::uint32_t>& partitions);

/// How long an owner has to fetch a payload asked for ahead of its read:
/// a base, and a second for each 64 MiB.
clock_duration prefetch_time(std::uint64_t size) {
  return std::chrono::seconds{10} + std::chrono::seconds{static_cast<std::int64_t>(size >> 26)};
}

/// Asks the owner `member` reads through to fetch the payloads of the
/// messages it will be handed next (mq_groups::upcoming) that the owner
/// does not hold, each once (docs/mq.md, "Payloads are fetched ahead").
/// Best effort: a prefetch refused or lost leaves the read to fetch it.
void prefetch_for(self_ptr self, const mq_member_id& member) {
  auto& st = self->state;
  auto host = st.mq_hosts.find(member);
  if (host == st.mq_hosts.end()) return;
  auto* owner = st.members.find(host->second.owner);
  if (owner == nullptr || owner->state != wire::member_state::up) return;
  auto owner_id = owner->id;
  for (auto& u : st.mq_groups.upcoming(member.first, member.second, st.mq, host->second.hinted)) {
    if (st.mq_prefetching.size() >= mq_prefetching_max) return;  // the rest when answers come
    auto& hinted = host->second.hinted[u.partition];
    SLUICE_ASSERT(u.offset >= hinted);
    hinted = u.offset + 1;
    auto* entry = st.dir.find(u.payload);
    if (entry == nullptr || entry->held_by(owner_id)) continue;
    wire::mq_prefetch p{u.payload, entry->version, entry->size, {}};
    auto add = [&](node_id id) {
      auto* m = st.members.find(id);
      if (m != nullptr && m->state == wire::member_state::up) p.holders.push_back(wire::replica{id, m->address});
    };
    add(entry->holder);
    for (auto r : entry->replicas) add(r);
    if (p.holders.empty()) continue;
    if (owner->link == 0) return;  // no route to it now: its reads fetch for themselves
    if (!st.mq_prefetching.emplace(owner_id, u.payload).second) continue;  // asked already (another group)
    // Once, on the owner's route of the time, for as long as the fetch may
    // take (ask_member's short tries would cut a large one off).
    auto deadline = st.ep->now() + prefetch_time(entry->size);
    st.ep->request(owner->link, wire::mq{std::move(p)}, {}, deadline,
                   request_options{owner->via.value != 0 ? owner_id : node_id{}, {}},
                   [self, asked = std::pair{owner_id, u.payload}](result<wire::message> reply, bool) {
                     auto& st = self->state;
                     st.mq_prefetching.erase(asked);
                     if (!reply) {
                       st.ep->log()->debug("mq: prefetch of '{}' by owner {} failed: {}", asked.second,
                                           asked.first.to_string(), reply.error().to_string());
                     }
                   });
  }
}

/// Partitions changed hands: what their new holders read next is
/// fetched for them; what the old ones were fetched is theirs no more.
void prefetch_moved(self_ptr self, const std::vector<master::mq_move>& moves) {
  auto& st = self->state;
  for (auto& m : moves) {
    if (!m.from) continue;
    if (auto host = st.mq_hosts.find({m.group, *m.from}); host != st.mq_hosts.end()) host->second.hinted.erase(m.partition);
  }
  for (auto& m : moves) {
    if (m.to) prefetch_for(self, {m.group, *m.to});
  }
}

/// A message ran out of deliveries in a group: it counts as acked there,
/// and goes on to its topic's dead-letter topic, when it has one, as a
/// shell naming the same payload, with its origin as message id.
void dead_letter(self_ptr self, const master::mq_dead_letter& d) {
  auto& st = self->state;
  auto& from = d.partition;
  auto* cfg = st.mq.config_of(from.topic);
  auto where = from.topic + "/" + std::to_string(from.partition) + "/" + std::to_string(d.shell.offset);
  if (cfg == nullptr || cfg->dead_letter.empty()) {
    st.ep->log()->warn("mq: {} ran out of deliveries in group '{}'; dropped (no dead-letter topic)", where, d.group);
    return;
  }
  auto* to = st.mq.config_of(cfg->dead_letter);
  if (to == nullptr) {
    st.ep->log()->warn("mq: {} ran out of deliveries in group '{}'; dropped: dead-letter topic '{}' does not exist",
                       where, d.group, cfg->dead_letter);
    return;
  }
  auto origin = where + "@" + d.group;
  if (origin.size() > master::mq_message_id_bytes_max) origin.clear();
  master::mq_message msg{d.shell.payload, d.shell.size_bytes, d.shell.producer, origin, {},
                         from.partition % to->partitions, true};
  auto appended = st.mq.append(cfg->dead_letter, msg, st.wall_ms());
  if (!appended) {
    st.ep->log()->warn("mq: {} ran out of deliveries in group '{}'; dropped: dead-letter topic '{}' refused it: {}",
                       where, d.group, cfg->dead_letter, appended.error().message());
    return;
  }
  free_payloads(self, appended->dropped);
  st.ep->log()->info("mq: {} ran out of deliveries in group '{}'; dead-lettered to {}/{}/{}", where, d.group,
                     cfg->dead_letter, appended->partition, appended->offset);
  grew(self, cfg->dead_letter, {appended->partition});
}

void answer_parked(self_ptr self, std::map<mq_member_id, mq_parked_poll>::iterator it, wire::mq_polled polled) {
  auto ctx = it->second.ctx;
  self->state.mq_polls.erase(it);
  reply_mq(self, ctx, std::move(polled));
}

wire::mq_polled to_wire(master::mq_polled& p) {
  wire::mq_polled out;
  out.deliveries.reserve(p.deliveries.size());
  for (auto& d : p.deliveries) {
    out.deliveries.push_back({{d.partition.topic, d.partition.partition}, d.offset, std::move(d.payload),
                              d.size_bytes, d.delivery_count, d.generation, d.ack_deadline_ms,
                              std::move(d.message_id)});
  }
  return out;
}

clock_time at_wall(self_ptr self, std::int64_t wall_ms) {
  auto& st = self->state;
  auto ahead = std::max<std::int64_t>(0, wall_ms - st.wall_ms());
  return st.ep->now() + std::chrono::duration_cast<clock_duration>(std::chrono::milliseconds{ahead});
}

/// Polls for `ctx`'s member; answers it, or parks it when nothing came
/// and it may wait. With `parked`, the member was parked before: it
/// stays parked (same request) when there is still nothing.
void run_poll(self_ptr self, const request_context& ctx, const wire::mq_poll& p) {
  auto& st = self->state;
  mq_member_id member{p.group, p.session};
  auto polled = st.mq_groups.poll(p.group, p.session, std::max<std::uint32_t>(p.max_messages, 1), p.max_bytes,
                                  st.wall_ms(), st.mq, p.poll_seq, p.answered_seq);
  journal(self);
  auto old = st.mq_polls.find(member);
  if (!polled) {
    if (old != st.mq_polls.end() && old->second.ctx.request_id == ctx.request_id) st.mq_polls.erase(old);
    return answer_error(self, ctx, polled.error());
  }
  bool same = old != st.mq_polls.end() && old->second.ctx.request_id == ctx.request_id &&
              old->second.ctx.link == ctx.link;
  if (old != st.mq_polls.end() && !same) {
    // A member has one poll waiting at most: the newer one wins.
    answer_parked(self, old, {});
    old = st.mq_polls.end();
  }
  auto now = st.ep->now();
  auto until = std::min(now + std::chrono::duration_cast<clock_duration>(std::chrono::milliseconds{p.wait_ms}),
                        ctx.deadline - answer_margin);
  if (!polled->deliveries.empty() || until <= now) {
    if (same) st.mq_polls.erase(old);
    return reply_mq(self, ctx, to_wire(*polled));
  }
  auto& parked = st.mq_polls[member];
  if (!same) {
    parked = mq_parked_poll{ctx, p, until, std::nullopt};
    parked.poll.settles = {};  // applied already: a parked poll runs again without them
  }
  parked.retry.reset();
  if (polled->retry_at_ms) parked.retry = at_wall(self, *polled->retry_at_ms);
  arm_timer(self, parked.retry ? std::min(*parked.retry, parked.until) : parked.until);
}

/// The member may have something to poll now: runs its parked poll again.
void wake_member(self_ptr self, const mq_member_id& member) {
  auto& st = self->state;
  auto it = st.mq_polls.find(member);
  if (it == st.mq_polls.end()) return;
  auto ctx = it->second.ctx;
  auto poll = it->second.poll;
  run_poll(self, ctx, poll);
}

void wake_members(self_ptr self, const std::vector<mq_member_id>& members) {
  for (auto& m : members) wake_member(self, m);
}

/// A partition moved while its old holder may still be reading the
/// payloads of what it was handed (its poll answered, its reads not done):
/// those payloads stay until master::mq_recall_grace_ms from now, even if
/// the new holder consumes their messages first.
void keep_recalled(self_ptr self, const master::mq_move& m) {
  auto& st = self->state;
  auto until = st.wall_ms() + master::mq_recall_grace_ms;
  for (auto offset : m.recalled) {
    auto* shell = st.mq.find(m.partition.topic, m.partition.partition, offset);
    if (shell == nullptr) continue;
    auto it = st.mq_recalled.find(shell->payload);
    if (it != st.mq_recalled.end()) {
      it->second.until_ms = std::max(it->second.until_ms, until);
      continue;
    }
    if (st.mq_recalled.size() >= mq_recalled_max) {
      st.ep->log()->debug("mq: {} recalled payloads kept already; '{}' is not", mq_recalled_max, shell->payload);
      continue;
    }
    st.mq_recalled.emplace(shell->payload, mq_recall{until, false});
  }
}

/// Frees the recalled payloads whose time is up and whose message went.
void release_recalled(self_ptr self) {
  auto& st = self->state;
  auto now_ms = st.wall_ms();
  std::vector<std::string> due;
  for (auto it = st.mq_recalled.begin(); it != st.mq_recalled.end();) {
    if (it->second.until_ms > now_ms) {
      ++it;
      continue;
    }
    if (it->second.freed) due.push_back(it->first);
    it = st.mq_recalled.erase(it);
  }
  free_payloads(self, due);
}

void moved(self_ptr self, const std::vector<master::mq_move>& moves) {
  for (auto& m : moves) {
    if (m.from && !m.recalled.empty() && !self->state.plant_mq_free_recalled_at_once) keep_recalled(self, m);
  }
  for (auto& m : moves) {
    if (m.to) wake_member(self, {m.group, *m.to});
  }
  prefetch_moved(self, moves);
}

/// `topic`'s `partitions` grew: their parked readers poll again, and the
/// payloads each holder reads next are fetched for it.
void grew(self_ptr self, const std::string& topic, const std::set<std::uint32_t>& partitions) {
  auto& st = self->state;
  for (auto p : partitions) {
    wake_members(self, st.mq_groups.wake(topic, p));
    for (auto& member : st.mq_groups.holders(topic, p)) prefetch_for(self, member);
  }
}

/// A member is gone (left, lapsed, its group deleted): a poll it left
/// waiting is answered.
void member_gone(self_ptr self, const mq_member_id& member, const error& why) {
  auto& st = self->state;
  st.mq_lease_ms.erase(member);
  st.mq_hosts.erase(member);
  auto it = st.mq_polls.find(member);
  if (it == st.mq_polls.end()) return;
  auto ctx = it->second.ctx;
  st.mq_polls.erase(it);
  answer_error(self, ctx, why);
}

void retry_blocked(self_ptr self, const std::string& topic);

/// Drops what every group consumed and what retention lets go, frees
/// their payloads and lets waiting producers try again.
void prune(self_ptr self) {
  auto& st = self->state;
  auto pruned = st.mq.prune(st.wall_ms(), st.mq_groups.consumed_upto(st.mq));
  if (!st.plant_mq_keep_consumed_payloads) free_payloads(self, pruned.payloads);
  journal(self);
  for (auto& t : pruned.topics) retry_blocked(self, t);
}

/// Why a message of a produce is refused before the log sees it, if it is.
std::optional<error> check_payload(self_ptr self, const std::string& topic, const wire::mq_message& m) {
  auto& st = self->state;
  if (!m.payload.starts_with(payload_prefix(topic))) {
    return error{errc::invalid_argument,
                 "a payload of topic '" + topic + "' must be an object under '" + payload_prefix(topic) + "'"};
  }
  auto* entry = st.dir.find(m.payload);
  if (entry == nullptr) return error{errc::not_found, "the payload has no committed version"};
  if (entry->size != m.size_bytes) {
    return error{errc::invalid_argument, "the payload holds " + std::to_string(entry->size) + " bytes, not " +
                                             std::to_string(m.size_bytes)};
  }
  return std::nullopt;
}

/// Appends the messages of `b` not appended yet, in order. Returns false
/// when the topic filled up and the produce is to wait (policy block);
/// otherwise every message has its result.
bool append_rest(self_ptr self, mq_blocked_produce& b, std::set<std::uint32_t>& grown) {
  auto& st = self->state;
  auto& topic = b.produce.topic;
  while (b.results.size() < b.produce.messages.size()) {
    auto& m = b.produce.messages[b.results.size()];
    if (auto bad = check_payload(self, topic, m)) {
      b.results.push_back({bad->code(), bad->message(), 0, 0, false});
      continue;
    }
    master::mq_message msg{m.payload, m.size_bytes, b.produce.session, m.message_id, m.key, std::nullopt};
    if (m.has_partition) msg.partition = m.partition;
    auto appended = st.mq.append(topic, msg, st.wall_ms());
    if (!appended) {
      auto* cfg = st.mq.config_of(topic);
      if (appended.code() == errc::overloaded && cfg != nullptr && cfg->full == master::mq_full_policy::block) {
        return false;
      }
      b.results.push_back({appended.code(), appended.error().message(), 0, 0, false});
      continue;
    }
    free_payloads(self, appended->dropped);
    if (appended->duplicate) {
      // The first append's payload stays; this retry's is not needed.
      auto* first = st.mq.find(topic, appended->partition, appended->offset);
      if (first == nullptr || first->payload != m.payload) free_payload(self, m.payload);
    } else {
      pin_payload(self, m.payload);
      grown.insert(appended->partition);
    }
    b.results.push_back({errc::ok, {}, appended->partition, appended->offset, appended->duplicate});
  }
  return true;
}

/// Finishes a produce: journals, wakes readers of what grew, answers.
void produced(self_ptr self, mq_blocked_produce& b, const std::set<std::uint32_t>& grown) {
  journal(self);
  grew(self, b.produce.topic, grown);
  reply_mq(self, b.ctx, wire::mq_produced{std::move(b.results)});
}

/// Answers what remains of a waiting produce `overloaded`.
void give_up(self_ptr self, mq_blocked_produce& b, const std::string& why) {
  while (b.results.size() < b.produce.messages.size()) b.results.push_back({errc::overloaded, why, 0, 0, false});
  produced(self, b, {});
}

/// Room freed in `topic`: its waiting produces go on, oldest first,
/// until one has to wait again.
void retry_blocked(self_ptr self, const std::string& topic) {
  auto& st = self->state;
  auto it = st.mq_blocked.find(topic);
  while (it != st.mq_blocked.end() && !it->second.empty()) {
    auto& b = it->second.front();
    std::set<std::uint32_t> grown;
    bool done = append_rest(self, b, grown);
    if (!done) {
      journal(self);
      grew(self, topic, grown);
      return;
    }
    auto finished = std::move(b);
    it->second.pop_front();
    --st.mq_blocked_count;
    produced(self, finished, grown);
    it = st.mq_blocked.find(topic);  // a wake may have changed the table
  }
  if (it != st.mq_blocked.end()) st.mq_blocked.erase(it);
}

void on_produce(self_ptr self, const request_context& ctx, wire::mq_produce p) {
  auto& st = self->state;
  if (st.mq.config_of(p.topic) == nullptr) {
    return answer_error(self, ctx, error{errc::not_found, "no topic '" + p.topic + "'"});
  }
  if (p.messages.empty() || p.messages.size() > master::mq_append_batch_max) {
    return answer_error(self, ctx, error{errc::invalid_argument,
                                         "a produce carries 1 to " + std::to_string(master::mq_append_batch_max) +
                                             " messages, not " + std::to_string(p.messages.size())});
  }
  auto until = ctx.deadline - answer_margin;
  mq_blocked_produce b{ctx, std::move(p), {}, until};
  auto& topic = b.produce.topic;
  auto queued = st.mq_blocked.find(topic);
  bool behind = queued != st.mq_blocked.end() && !queued->second.empty();
  std::set<std::uint32_t> grown;
  if (!behind && append_rest(self, b, grown)) return produced(self, b, grown);
  // The topic is full: wait for room behind the produces already waiting.
  if (st.mq_blocked_count >= mq_blocked_max || until <= st.ep->now()) {
    return give_up(self, b, "topic '" + topic + "' is full");
  }
  journal(self);
  grew(self, topic, grown);
  st.mq_blocked[topic].push_back(std::move(b));
  ++st.mq_blocked_count;
  arm_timer(self, until);
}

void on_create(self_ptr self, const request_context& ctx, const wire::mq_create_topic& c) {
  auto& st = self->state;
  if (c.config.full > wire::mq_full::drop_oldest) {
    return answer_error(self, ctx, error{errc::invalid_argument, "unknown full policy"});
  }
  auto created = st.mq.create(c.topic, core_config(c.config));
  if (!created) return answer_error(self, ctx, created.error());
  if (*created) moved(self, st.mq_groups.topics_changed(st.mq));
  journal(self);
  reply_mq(self, ctx, wire::mq_topic_created{*created});
}

void on_delete(self_ptr self, const request_context& ctx, const wire::mq_delete_topic& d) {
  auto& st = self->state;
  auto removed = st.mq.remove(d.topic);
  if (!removed) return answer_error(self, ctx, removed.error());
  free_payloads(self, *removed);
  moved(self, st.mq_groups.topics_changed(st.mq));
  if (auto it = st.mq_blocked.find(d.topic); it != st.mq_blocked.end()) {
    auto waiting = std::move(it->second);
    st.mq_blocked.erase(it);
    st.mq_blocked_count -= waiting.size();
    for (auto& b : waiting) {
      while (b.results.size() < b.produce.messages.size()) {
        b.results.push_back({errc::not_found, "topic '" + d.topic + "' was deleted", 0, 0, false});
      }
      produced(self, b, {});
    }
  }
  journal(self);
  answer(self, ctx, wire::ok_reply{});
}

void on_list(self_ptr self, const request_context& ctx) {
  auto& st = self->state;
  wire::mq_topics out;
  for (auto& name : st.mq.list()) {
    auto info = st.mq.describe(name);
    if (!info) continue;
    wire::mq_topic_info t{name, wire_config(info->config), {}};
    for (auto& p : info->partitions) t.partitions.push_back({p.start, p.end, p.bytes});
    out.topics.push_back(std::move(t));
  }
  reply_mq(self, ctx, std::move(out));
}

void on_join(self_ptr self, const request_context& ctx, const wire::mq_join& j) {
  auto& st = self->state;
  if (j.config.start > wire::mq_start_at::latest) {
    return answer_error(self, ctx, error{errc::invalid_argument, "unknown start position"});
  }
  auto lease = j.lease_ms == 0 ? default_lease_ms : static_cast<std::int64_t>(std::min<std::uint64_t>(j.lease_ms, max_lease_ms));
  auto now = st.wall_ms();
  auto moves = st.mq_groups.join(j.group, j.session, core_group(j.config), now + lease, now, st.mq);
  if (!moves) return answer_error(self, ctx, moves.error());
  st.mq_lease_ms[{j.group, j.session}] = lease;
  st.mq_hosts[{j.group, j.session}].owner = ctx.source;
  journal(self);
  moved(self, *moves);
  wire::mq_joined out;
  for (auto& p : st.mq_groups.assigned(j.group, j.session)) out.assigned.push_back({p.topic, p.partition});
  reply_mq(self, ctx, std::move(out));
}

void on_leave(self_ptr self, const request_context& ctx, const wire::mq_leave& l) {
  auto& st = self->state;
  auto moves = st.mq_groups.leave(l.group, l.session, st.mq);
  if (!moves) return answer_error(self, ctx, moves.error());
  member_gone(self, {l.group, l.session}, error{errc::cancelled, "the member left the group"});
  journal(self);
  moved(self, *moves);
  answer(self, ctx, wire::ok_reply{});
}

/// Applies one ack, ack_upto or nack of `group`'s member `session`;
/// returns how many deliveries it settled.
result<std::uint64_t> apply_settle(self_ptr self, const std::string& group, std::uint64_t session,
                                   const wire::mq_settle& s) {
  auto& st = self->state;
  master::mq_partition_id id{s.partition.topic, s.partition.partition};
  switch (s.kind) {
    case wire::mq_settle_kind::ack: {
      auto ok = st.mq_groups.ack(group, session, id, s.offset, s.generation);
      if (!ok) return ok.error();
      return 1;
    }
    case wire::mq_settle_kind::ack_upto:
      return st.mq_groups.ack_upto(group, session, id, s.offset, s.answered_seq);
    case wire::mq_settle_kind::nack: {
      auto dead = st.mq_groups.nack(group, session, id, s.offset, s.generation, s.delay_ms, st.wall_ms(), st.mq);
      if (!dead) return dead.error();
      if (*dead) dead_letter(self, **dead);
      return 1;
    }
  }
  return error{errc::invalid_argument, "unknown settle kind"};
}

void on_poll(self_ptr self, const request_context& ctx, const wire::mq_poll& p) {
  auto& st = self->state;
  mq_member_id member{p.group, p.session};
  auto lease = st.mq_lease_ms.find(member);
  if (lease == st.mq_lease_ms.end()) {
    return answer_error(self, ctx, error{errc::not_found, "not a member of group '" + p.group + "'; join first"});
  }
  // A member waiting in a poll is alive: its lease covers the wait.
  auto wait = static_cast<std::int64_t>(std::min<std::uint64_t>(p.wait_ms, max_lease_ms));
  if (auto ok = st.mq_groups.heartbeat(p.group, p.session, st.wall_ms() + lease->second + wait); !ok) {
    return answer_error(self, ctx, ok.error());
  }
  st.mq_hosts[member].owner = ctx.source;
  if (!p.settles.empty()) {
    // The acks and nacks it carries come first, as mq_settle each; the
    // first refused fails the poll (those before it stand).
    if (p.settles.size() > wire::mq_poll_settles_max) {
      return answer_error(self, ctx, error{errc::invalid_argument, "a poll carries at most " +
                                                                       std::to_string(wire::mq_poll_settles_max) +
                                                                       " acks and nacks"});
    }
    for (auto& s : p.settles) {
      auto settled = apply_settle(self, p.group, p.session, s);
      if (!settled) {
        prune(self);
        return answer_error(self, ctx, settled.error());
      }
    }
    prune(self);
  }
  run_poll(self, ctx, p);
  // What the settles made room for, or a new member's first reads.
  prefetch_for(self, member);
}

void on_settle(self_ptr self, const request_context& ctx, const wire::mq_settle& s) {
  auto count = apply_settle(self, s.group, s.session, s);
  if (!count) return answer_error(self, ctx, count.error());
  prune(self);
  // Room in the member's prefetch, or a nacked message due at once.
  wake_member(self, {s.group, s.session});
  prefetch_for(self, {s.group, s.session});
  reply_mq(self, ctx, wire::mq_settled{*count});
}

void on_seek(self_ptr self, const request_context& ctx, const wire::mq_seek& s) {
  auto& st = self->state;
  master::mq_partition_id id{s.partition.topic, s.partition.partition};
  auto ok = s.by_time ? st.mq_groups.seek_time(s.group, id, s.time_ms, st.mq)
                      : st.mq_groups.seek(s.group, id, s.offset, st.mq);
  if (!ok) return answer_error(self, ctx, ok.error());
  journal(self);
  for (auto& [member, host] : st.mq_hosts) {
    if (member.first == s.group) host.hinted.erase(id);  // the cursor moved: what comes next is another run
  }
  grew(self, id.topic, {id.partition});
  answer(self, ctx, wire::ok_reply{});
}

void on_group_status(self_ptr self, const request_context& ctx, const wire::mq_group_status& g) {
  auto& st = self->state;
  std::vector<std::string> groups;
  if (g.group.empty()) {
    groups = st.mq_groups.list();
  } else if (st.mq_groups.config_of(g.group) == nullptr) {
    return answer_error(self, ctx, error{errc::not_found, "no group '" + g.group + "'"});
  } else {
    groups.push_back(g.group);
  }
  wire::mq_group_status_reply out;
  for (auto& name : groups) {
    for (auto& topic : st.mq_groups.config_of(name)->topics) {
      auto info = st.mq.describe(topic);
      if (!info) continue;
      for (std::uint32_t p = 0; p < info->partitions.size(); ++p) {
        master::mq_partition_id id{topic, p};
        auto view = st.mq_groups.view(name, id);
        auto lag = st.mq_groups.lag(name, id, st.mq);
        if (!view || !lag) continue;
        out.partitions.push_back({name, {topic, p}, view->member.value_or(0), view->generation, view->committed,
                                  view->next, view->in_flight, lag->messages, lag->bytes});
      }
    }
  }
  reply_mq(self, ctx, std::move(out));
}

void on_delete_group(self_ptr self, const request_context& ctx, const wire::mq_delete_group& d) {
  auto& st = self->state;
  auto ok = st.mq_groups.remove(d.group);
  if (!ok) return answer_error(self, ctx, ok.error());
  std::vector<mq_member_id> gone;
  for (auto& [member, lease] : st.mq_lease_ms) {
    if (member.first == d.group) gone.push_back(member);
  }
  for (auto& m : gone) member_gone(self, m, error{errc::not_found, "group '" + d.group + "' was deleted"});
  prune(self);
  answer(self, ctx, wire::ok_reply{});
}

}  // namespace

void on_mq(self_ptr self, const request_context& ctx, const wire::mq& m) {
  std::visit(overloaded{
                 [&](const wire::mq_create_topic& c) { on_create(self, ctx, c); },
                 [&](const wire::mq_delete_topic& d) { on_delete(self, ctx, d); },
                 [&](const wire::mq_list_topics&) { on_list(self, ctx); },
                 [&](const wire::mq_produce& p) { on_produce(self, ctx, p); },
                 [&](const wire::mq_join& j) { on_join(self, ctx, j); },
                 [&](const wire::mq_leave& l) { on_leave(self, ctx, l); },
                 [&](const wire::mq_poll& p) { on_poll(self, ctx, p); },
                 [&](const wire::mq_settle& s) { on_settle(self, ctx, s); },
                 [&](const wire::mq_seek& s) { on_seek(self, ctx, s); },
                 [&](const wire::mq_group_status& g) { on_group_status(self, ctx, g); },
                 [&](const wire::mq_delete_group& d) { on_delete_group(self, ctx, d); },
                 [&](const auto& other) {
                   answer_error(self, ctx, error{errc::invalid_argument,
                                                 "the master does not serve " +
                                                     std::string{wire::mq_body_name(wire::mq_body{other})}});
                 },
             },
             m.body);
}

/// Whether a produce waiting for room names `key`.
bool waits_to_append(const master_state& st, std::string_view key) {
  for (auto& [topic, queue] : st.mq_blocked) {
    for (auto& b : queue) {
      for (auto& m : b.produce.messages) {
        if (m.payload == key) return true;
      }
    }
  }
  return false;
}

/// A producer that dies between committing a payload and appending its
/// message leaves an object under `~mq/` that nothing names: every shell's
/// payload is pinned, so an unpinned payload key that no waiting produce
/// names, seen so on two sweeps mq_orphan_grace apart, is freed. A few
/// keys per tick, so a long log costs no pause.
void sweep_orphans(self_ptr self) {
  auto& st = self->state;
  auto now_ms = st.wall_ms();
  if (now_ms - st.mq_swept_ms < 1000) return;  // once a second at most
  st.mq_swept_ms = now_ms;
  auto grace_ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.cfg.mq_orphan_grace).count();
  auto page = st.dir.list("~mq/", st.mq_sweep_after, mq_sweep_batch);
  for (auto& k : page.keys) {
    if (st.pins.pinned(k.key, now_ms) || st.expiring.count(k.key) != 0 || st.mq_recalled.count(k.key) != 0 ||
        waits_to_append(st, k.key)) {
      st.mq_orphan_suspects.erase(k.key);
      continue;
    }
    auto it = st.mq_orphan_suspects.find(k.key);
    if (it == st.mq_orphan_suspects.end()) {
      if (st.mq_orphan_suspects.size() < mq_orphan_suspects_max) st.mq_orphan_suspects.emplace(k.key, now_ms);
      continue;
    }
    if (now_ms - it->second < grace_ms) continue;
    st.ep->log()->info("mq: freeing payload '{}': no message names it", k.key);
    st.mq_orphan_suspects.erase(it);
    free_payload(self, k.key);
  }
  if (page.more && !page.keys.empty()) {
    st.mq_sweep_after = page.keys.back().key;
    return;
  }
  // A round is done: forget suspects that went meanwhile.
  st.mq_sweep_after.clear();
  std::erase_if(st.mq_orphan_suspects, [&](const auto& s) { return st.dir.find_any(s.first) == nullptr; });
  SLUICE_ASSERT(st.mq_orphan_suspects.size() <= mq_orphan_suspects_max);
}

void mq_tick(self_ptr self) {
  auto& st = self->state;
  st.mq_timer_at.reset();
  sweep_orphans(self);
  auto now_ms = st.wall_ms();
  auto lapsed = st.mq_groups.expire(now_ms, st.mq);
  for (auto& m : lapsed.members) {
    st.ep->log()->info("mq: member {} of group '{}' lapsed", node_id{m.second}.to_string(), m.first);
    member_gone(self, m, error{errc::timeout, "the member's lease lapsed"});
  }
  auto expired = st.mq_groups.expire_deliveries(now_ms, st.mq);
  for (auto& d : expired.dead) dead_letter(self, d);
  journal(self);
  moved(self, lapsed.moves);
  wake_members(self, expired.wake);
  prune(self);
  release_recalled(self);
  // Waits that reached their deadline end; polls with a redelivery due
  // look again.
  auto now = st.ep->now();
  std::vector<mq_member_id> due;
  for (auto& [member, parked] : st.mq_polls) {
    if (parked.until <= now || (parked.retry && *parked.retry <= now)) due.push_back(member);
  }
  for (auto& m : due) {
    auto it = st.mq_polls.find(m);
    if (it == st.mq_polls.end()) continue;
    if (it->second.until <= now) {
      answer_parked(self, it, {});
    } else {
      wake_member(self, m);
    }
  }
  for (auto topic = st.mq_blocked.begin(); topic != st.mq_blocked.end();) {
    auto& queue = topic->second;
    while (!queue.empty() && queue.front().until <= now) {
      auto b = std::move(queue.front());
      queue.pop_front();
      --st.mq_blocked_count;
      give_up(self, b, "topic '" + topic->first + "' stayed full until the deadline");
    }
    topic = queue.empty() ? st.mq_blocked.erase(topic) : std::next(topic);
  }
  // The next deadline of what still waits.
  std::optional<clock_time> next;
  auto sooner = [&next](clock_time t) { next = next ? std::min(*next, t) : t; };
  for (auto& [member, parked] : st.mq_polls) {
    sooner(parked.until);
    if (parked.retry) sooner(*parked.retry);
  }
  for (auto& [topic, queue] : st.mq_blocked) {
    for (auto& b : queue) sooner(b.until);
  }
  if (next) arm_timer(self, *next);
}

void mq_reloaded(self_ptr self) {
  auto& st = self->state;
  auto polls = std::exchange(st.mq_polls, {});
  for (auto& [member, parked] : polls) {
    answer_error(self, parked.ctx, error{errc::unavailable, "the master reloaded its state"});
  }
  auto blocked = std::exchange(st.mq_blocked, {});
  st.mq_blocked_count = 0;
  for (auto& [topic, queue] : blocked) {
    for (auto& b : queue) answer_error(self, b.ctx, error{errc::unavailable, "the master reloaded its state"});
  }
  st.mq_lease_ms.clear();
  st.mq_hosts.clear();
}

}  // namespace sluice::master_detail
