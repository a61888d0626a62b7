#include "actors/master/mq_groups.hpp"

#include <algorithm>
#include <climits>

#include "runtime/assert.hpp"

namespace sluice::master {

namespace {

std::string describe_partition(const mq_partition_id& id) {
  return "topic '" + id.topic + "' partition " + std::to_string(id.partition);
}

/// A redelivery due at once (a partition moved, a deadline passed).
constexpr std::int64_t due_now = INT64_MIN;

}  // namespace

struct mq_groups::gather {
  std::uint64_t session;
  std::uint64_t poll_seq;
  member_state& member;
  std::int64_t now_ms;
  std::int64_t ack_timeout_ms;
  std::uint64_t max_bytes;
  std::size_t room;
  std::uint64_t bytes = 0;
  bool stop = false;  ///< a message did not fit max_bytes: nothing more this poll
  mq_polled out;

  /// Whether a message of `size` bytes may go out next; stops the poll
  /// when not, so that each partition still goes out in offset order.
  bool fits(std::uint64_t size) {
    if (stop || out.deliveries.size() >= room) return false;
    if (max_bytes == 0 || out.deliveries.empty() || bytes + size <= max_bytes) return true;
    stop = true;
    return false;
  }
};

result<void> check_group_config(const mq_group_config& c) {
  auto bad = [](const std::string& why) { return fail(errc::invalid_argument, "group config: " + why); };
  if (c.topics.empty() || c.topics.size() > mq_group_topics_max) {
    return bad("a group reads 1 to " + std::to_string(mq_group_topics_max) + " topics");
  }
  for (std::size_t i = 0; i < c.topics.size(); ++i) {
    if (auto ok = check_mq_name(c.topics[i], "topic"); !ok) return ok.error();
    if (i > 0 && c.topics[i - 1] >= c.topics[i]) return bad("the topics must be sorted and distinct");
  }
  if (c.ack_timeout_ms < 1 || c.ack_timeout_ms > mq_delay_ms_max) {
    return bad("ack_timeout_ms must be 1 to " + std::to_string(mq_delay_ms_max));
  }
  if (c.max_deliveries < 1 || c.max_deliveries > mq_deliveries_max) {
    return bad("max_deliveries must be 1 to " + std::to_string(mq_deliveries_max));
  }
  if (c.prefetch < 1 || c.prefetch > mq_prefetch_max) {
    return bad("prefetch must be 1 to " + std::to_string(mq_prefetch_max));
  }
  if (c.start != mq_start::earliest && c.start != mq_start::latest) return bad("the start is unknown");
  return {};
}

// Membership.

result<std::vector<mq_move>> mq_groups::join(const std::string& group, std::uint64_t session,
                                             const mq_group_config& config, std::int64_t until_ms,
                                             std::int64_t now_ms, const mq_log& log) {
  if (auto ok = check_mq_name(group, "group"); !ok) return ok.error();
  if (until_ms <= now_ms) return fail(errc::invalid_argument, "the lease given to join group '" + group + "' is over");
  auto it = groups_.find(group);
  if (it != groups_.end()) {
    auto& g = it->second;
    if (g.config != config) {
      return fail(errc::conflict, "group '" + group + "' exists with other topics or settings; join with its own");
    }
    if (auto m = g.members.find(session); m != g.members.end()) {
      m->second.until_ms = std::max(m->second.until_ms, until_ms);
      return std::vector<mq_move>{};
    }
    if (g.members.size() >= mq_group_members_max) {
      return fail(errc::overloaded, "group '" + group + "' has " + std::to_string(mq_group_members_max) +
                                        " members, its limit");
    }
    g.members[session].until_ms = until_ms;
    return rebalance(group, g, log);
  }
  if (auto ok = check_group_config(config); !ok) return ok.error();
  for (auto& topic : config.topics) {
    if (log.config_of(topic) == nullptr) return fail(errc::not_found, "no topic '" + topic + "' for group '" + group + "'");
  }
  if (groups_.size() >= mq_groups_max) {
    return fail(errc::overloaded, "the master holds " + std::to_string(mq_groups_max) + " groups, its limit");
  }
  auto ok = restore_group(group, config);
  SLUICE_ASSERT(ok.ok());
  record(mq_group_created{group, config});
  auto& g = groups_.at(group);
  g.members[session].until_ms = until_ms;
  return rebalance(group, g, log);
}

result<void> mq_groups::heartbeat(const std::string& group, std::uint64_t session, std::int64_t until_ms) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto m = it->second.members.find(session);
  if (m == it->second.members.end()) {
    return fail(errc::not_found, "session " + std::to_string(session) + " is not a member of group '" + group +
                                     "'; join again");
  }
  m->second.until_ms = std::max(m->second.until_ms, until_ms);
  return {};
}

result<std::vector<mq_move>> mq_groups::leave(const std::string& group, std::uint64_t session, const mq_log& log) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto& g = it->second;
  if (g.members.erase(session) == 0) {
    return fail(errc::not_found, "session " + std::to_string(session) + " is not a member of group '" + group + "'");
  }
  return rebalance(group, g, log);
}

mq_lapsed mq_groups::expire(std::int64_t now_ms, const mq_log& log) {
  mq_lapsed out;
  for (auto& [name, g] : groups_) {
    bool lapsed = false;
    for (auto m = g.members.begin(); m != g.members.end();) {
      if (m->second.until_ms > now_ms) {
        ++m;
        continue;
      }
      out.members.emplace_back(name, m->first);
      m = g.members.erase(m);
      lapsed = true;
    }
    if (!lapsed) continue;
    auto moves = rebalance(name, g, log);
    out.moves.insert(out.moves.end(), moves.begin(), moves.end());
  }
  return out;
}

result<void> mq_groups::remove(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  for (auto& topic : it->second.config.topics) {
    auto r = readers_.find(topic);
    SLUICE_ASSERT(r != readers_.end());
    r->second.erase(group);
    if (r->second.empty()) readers_.erase(r);
  }
  groups_.erase(it);
  forget_offset_records(group);
  record(mq_group_deleted{group});
  return {};
}

std::vector<mq_move> mq_groups::topics_changed(const mq_log& log) {
  std::vector<mq_move> out;
  for (auto& [name, g] : groups_) {
    auto moves = rebalance(name, g, log);
    out.insert(out.end(), moves.begin(), moves.end());
  }
  return out;
}

// Assignment.

std::vector<mq_move> mq_groups::rebalance(const std::string& name, group_state& g, const mq_log& log) {
  sync_partitions(name, g, log);
  std::vector<std::uint64_t> members;
  for (auto& [session, m] : g.members) members.push_back(session);
  std::vector<mq_move> moves;
  std::size_t i = 0;
  // Both in order, so the same members and partitions give the same spread.
  for (auto& [id, ps] : g.partitions) {
    std::optional<std::uint64_t> to;
    if (!members.empty()) to = members[i % members.size()];
    ++i;
    if (ps.member != to) move(name, g, id, ps, to, moves);
  }
  return moves;
}

void mq_groups::sync_partitions(const std::string& name, group_state& g, const mq_log& log) {
  for (auto it = g.partitions.begin(); it != g.partitions.end();) {
    auto* config = log.config_of(it->first.topic);
    if (config != nullptr && it->first.partition < config->partitions) {
      ++it;
      continue;
    }
    // The topic went: so does what the group knew of it.
    auto& ps = it->second;
    while (!ps.flying.empty()) land(g, ps, ps.flying.begin());
    if (ps.member) {
      if (auto m = g.members.find(*ps.member); m != g.members.end()) m->second.partitions.erase(it->first);
    }
    offset_records_.erase({name, it->first});
    record(mq_offset_removed{name, it->first});
    it = g.partitions.erase(it);
  }
  for (auto& topic : g.config.topics) {
    auto* config = log.config_of(topic);
    if (config == nullptr) continue;
    for (std::uint32_t p = 0; p < config->partitions; ++p) {
      mq_partition_id id{topic, p};
      if (g.partitions.contains(id)) continue;
      auto start = g.config.start == mq_start::earliest ? log.start_offset(topic, p) : log.end_offset(topic, p);
      SLUICE_ASSERT(start.ok());
      partition_state ps;
      ps.committed = ps.next = *start;
      record_offset(name, id, ps);
      g.partitions.emplace(std::move(id), std::move(ps));
    }
  }
}

void mq_groups::move(const std::string& name, group_state& g, const mq_partition_id& id, partition_state& ps,
                     std::optional<std::uint64_t> to, std::vector<mq_move>& moves) {
  // What the old holder did not ack goes out again, to the new one, at
  // once; what it acked stays acked.
  std::vector<std::uint64_t> recalled;
  recalled.reserve(ps.flying.size());
  while (!ps.flying.empty()) {
    auto it = ps.flying.begin();
    recalled.push_back(it->first);
    ps.redeliver.emplace(it->first, redelivery{due_now, it->second.deliveries});
    land(g, ps, it);
  }
  if (plant_forget_acks_) {
    for (auto offset : ps.acked) ps.redeliver.emplace(offset, redelivery{due_now, 1});
    ps.acked.clear();
  }
  if (ps.member) {
    if (auto m = g.members.find(*ps.member); m != g.members.end()) m->second.partitions.erase(id);
  }
  auto from = ps.member;
  ps.member = to;
  ps.generation += 1;
  if (to) {
    auto m = g.members.find(*to);
    SLUICE_ASSERT(m != g.members.end());
    m->second.partitions.insert(id);
  }
  record_offset(name, id, ps);
  moves.push_back(mq_move{name, id, from, to, ps.generation, std::move(recalled)});
}

// Delivery.

result<mq_polled> mq_groups::poll(const std::string& group, std::uint64_t session, std::size_t max_messages,
                                  std::uint64_t max_bytes, std::int64_t now_ms, const mq_log& log,
                                  std::uint64_t poll_seq, std::uint64_t answered_seq) {
  if (max_messages < 1 || max_messages > mq_poll_messages_max) {
    return fail(errc::invalid_argument, "a poll asks for 1 to " + std::to_string(mq_poll_messages_max) + " messages");
  }
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto& g = it->second;
  auto mit = g.members.find(session);
  if (mit == g.members.end() || mit->second.until_ms <= now_ms) {
    return fail(errc::not_found, "session " + std::to_string(session) + " is not a live member of group '" + group +
                                     "'; join again");
  }
  auto& m = mit->second;
  SLUICE_ASSERT(m.in_flight <= g.config.prefetch);
  take_back_lost(g, m, session, poll_seq, answered_seq, now_ms);
  gather gt{session, poll_seq, m, now_ms, g.config.ack_timeout_ms, max_bytes,
            std::min<std::size_t>(max_messages, g.config.prefetch - m.in_flight), 0, false, {}};
  if (gt.room == 0) {
    gt.out.wait = mq_wait::prefetch_full;
    return std::move(gt.out);
  }
  // Each poll starts one partition further, so none starves the others.
  std::vector<mq_partition_id> order{m.partitions.begin(), m.partitions.end()};
  if (!order.empty()) {
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(m.polls % order.size()), order.end());
  }
  m.polls += 1;
  for (auto& id : order) {
    if (auto start = log.start_offset(id.topic, id.partition); start.ok()) {
      catch_up(group, g, id, g.partitions.at(id), *start);
    }
  }
  for (auto& id : order) deliver_due(gt, id, g.partitions.at(id), log);
  for (auto& id : order) deliver_new(gt, id, g.partitions.at(id), log);
  m.parked = gt.out.deliveries.empty();
  if (m.parked) {
    gt.out.wait = mq_wait::log_grows;
    gt.out.retry_at_ms = next_due(g, m, now_ms);
  }
  return std::move(gt.out);
}

void mq_groups::take_back_lost(group_state& g, member_state& m, std::uint64_t session, std::uint64_t poll_seq,
                               std::uint64_t answered_seq, std::int64_t now_ms) {
  // Polls of one member come one after another: those between the last
  // answered and this one were answered into the void.
  if (poll_seq == 0 || poll_seq <= answered_seq + 1) return;
  for (auto& id : m.partitions) {
    auto& ps = g.partitions.at(id);
    for (auto it = ps.flying.begin(); it != ps.flying.end();) {
      auto next = std::next(it);
      auto& f = it->second;
      if (f.member == session && f.poll_seq > answered_seq && f.poll_seq < poll_seq) {
        auto offset = it->first;
        SLUICE_ASSERT(f.deliveries > 0);
        auto deliveries = f.deliveries - 1;
        land(g, ps, it);
        ps.redeliver.emplace(offset, redelivery{now_ms, deliveries});
      }
      it = next;
    }
  }
}

void mq_groups::deliver_due(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_log& log) {
  for (auto it = ps.redeliver.begin(); it != ps.redeliver.end();) {
    if (it->second.available_ms > gt.now_ms) {
      ++it;
      continue;
    }
    auto* shell = log.find(id.topic, id.partition, it->first);
    if (shell == nullptr) return;  // the topic went; topics_changed() will drop it
    if (!gt.fits(shell->size_bytes)) return;
    auto deliveries = it->second.deliveries;
    it = ps.redeliver.erase(it);
    deliver(gt, id, ps, *shell, deliveries);
  }
}

void mq_groups::deliver_new(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_log& log) {
  while (ps.next - ps.committed < mq_window_offsets_max) {
    auto* shell = log.find(id.topic, id.partition, ps.next);
    if (shell == nullptr) return;  // the end of the log
    if (!gt.fits(shell->size_bytes)) return;
    ps.next += 1;
    deliver(gt, id, ps, *shell, 0);
  }
}

void mq_groups::deliver(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_shell& shell,
                        std::uint32_t deliveries) {
  SLUICE_ASSERT(ps.member == gt.session);
  SLUICE_ASSERT(shell.offset >= ps.committed && shell.offset < ps.next);
  auto deadline_ms = gt.now_ms + gt.ack_timeout_ms;
  auto [it, inserted] = ps.flying.emplace(shell.offset, flight{gt.session, ps.generation, deadline_ms, deliveries + 1, gt.poll_seq});
  SLUICE_ASSERT(inserted);
  gt.member.in_flight += 1;
  gt.bytes += shell.size_bytes;
  gt.out.deliveries.push_back(
      mq_delivery{id, shell.offset, shell.payload, shell.size_bytes, deliveries + 1, ps.generation, deadline_ms,
                  shell.message_id});
}

std::optional<std::int64_t> mq_groups::next_due(const group_state& g, const member_state& m,
                                                std::int64_t now_ms) const {
  std::optional<std::int64_t> out;
  for (auto& id : m.partitions) {
    for (auto& [offset, r] : g.partitions.at(id).redeliver) {
      if (r.available_ms > now_ms && (!out || r.available_ms < *out)) out = r.available_ms;
    }
  }
  return out;
}

std::vector<mq_upcoming> mq_groups::upcoming(const std::string& group, std::uint64_t session, const mq_log& log,
                                             const std::map<mq_partition_id, std::uint64_t>& from) const {
  std::vector<mq_upcoming> out;
  auto it = groups_.find(group);
  if (it == groups_.end()) return out;
  auto& g = it->second;
  auto m = g.members.find(session);
  if (m == g.members.end()) return out;
  // A window past what it holds: while it works through those, the next
  // ones come to its host.
  std::uint64_t room = g.config.prefetch;
  // Redeliveries go out before new messages: they take room first.
  for (auto& id : m->second.partitions) {
    auto taken = std::min<std::uint64_t>(room, g.partitions.at(id).redeliver.size());
    room -= taken;
  }
  for (auto& id : m->second.partitions) {
    auto& ps = g.partitions.at(id);
    auto hinted = from.find(id);
    auto first = hinted == from.end() ? 0 : hinted->second;
    // Those named before were in the log, and still are (it is cut at
    // its start only, below the cursor): they take room unread.
    auto skip = first > ps.next ? std::min(room, first - ps.next) : 0;
    room -= skip;
    for (auto offset = ps.next + skip; room > 0 && offset - ps.committed < mq_window_offsets_max; ++offset) {
      auto* shell = log.find(id.topic, id.partition, offset);
      if (shell == nullptr) break;  // the end of the log
      room -= 1;
      if (offset >= first) out.push_back(mq_upcoming{id, offset, shell->payload, shell->size_bytes});
    }
  }
  SLUICE_ASSERT(out.size() <= g.config.prefetch);
  return out;
}

std::vector<mq_member_id> mq_groups::holders(const std::string& topic, std::uint32_t partition) const {
  std::vector<mq_member_id> out;
  auto r = readers_.find(topic);
  if (r == readers_.end()) return out;
  for (auto& name : r->second) {
    auto& g = groups_.at(name);
    auto ps = g.partitions.find(mq_partition_id{topic, partition});
    if (ps != g.partitions.end() && ps->second.member) out.emplace_back(name, *ps->second.member);
  }
  return out;
}

std::vector<mq_member_id> mq_groups::wake(const std::string& topic, std::uint32_t partition) {
  std::vector<mq_member_id> out;
  for (auto& holder : holders(topic, partition)) {
    auto& m = groups_.at(holder.first).members.at(holder.second);
    if (!m.parked) continue;
    m.parked = false;
    out.push_back(holder);
  }
  return out;
}

// Acks.

result<mq_groups::held> mq_groups::find_held(const std::string& group, std::uint64_t session,
                                             const mq_partition_id& partition) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto& g = it->second;
  auto m = g.members.find(session);
  if (m == g.members.end()) {
    return fail(errc::not_found, "session " + std::to_string(session) + " is not a member of group '" + group + "'");
  }
  auto ps = g.partitions.find(partition);
  if (ps == g.partitions.end()) {
    return fail(errc::not_found, "group '" + group + "' does not read " + describe_partition(partition));
  }
  if (ps->second.member != session) {
    return fail(errc::conflict, describe_partition(partition) + " is no longer this member's in group '" + group +
                                    "': it moved; its messages go out again to the new holder");
  }
  return held{&g, &m->second, &ps->second};
}

result<void> mq_groups::ack(const std::string& group, std::uint64_t session, const mq_partition_id& partition,
                            std::uint64_t offset, std::uint64_t generation) {
  auto h = find_held(group, session, partition);
  if (!h) return std::move(h).error();
  auto& ps = *h->state;
  if (generation != ps.generation) {
    return fail(errc::conflict, "the ack carries generation " + std::to_string(generation) + " of " +
                                    describe_partition(partition) + "; it is at " + std::to_string(ps.generation));
  }
  auto it = ps.flying.find(offset);
  if (it == ps.flying.end() || it->second.member != session) {
    return fail(errc::not_found, "offset " + std::to_string(offset) + " of " + describe_partition(partition) +
                                     " is not in flight to this member (acked, expired or never delivered)");
  }
  SLUICE_ASSERT(it->second.generation == ps.generation);
  land(*h->group, ps, it);
  settle(group, partition, ps, offset);
  return {};
}

result<std::uint64_t> mq_groups::ack_upto(const std::string& group, std::uint64_t session,
                                          const mq_partition_id& partition, std::uint64_t offset,
                                          std::uint64_t answered_seq) {
  auto h = find_held(group, session, partition);
  if (!h) return std::move(h).error();
  auto& ps = *h->state;
  std::vector<std::uint64_t> offsets;
  for (auto it = ps.flying.begin(); it != ps.flying.end() && it->first <= offset; ++it) {
    bool seen = answered_seq == 0 || it->second.poll_seq <= answered_seq;
    if (it->second.member == session && seen) offsets.push_back(it->first);
  }
  if (offsets.empty()) {
    return fail(errc::not_found, "nothing at or below offset " + std::to_string(offset) + " of " +
                                     describe_partition(partition) + " is in flight to this member");
  }
  for (auto o : offsets) {
    land(*h->group, ps, ps.flying.find(o));
    settle(group, partition, ps, o);
  }
  return static_cast<std::uint64_t>(offsets.size());
}

result<std::optional<mq_dead_letter>> mq_groups::nack(const std::string& group, std::uint64_t session,
                                                      const mq_partition_id& partition, std::uint64_t offset,
                                                      std::uint64_t generation, std::int64_t delay_ms,
                                                      std::int64_t now_ms, const mq_log& log) {
  if (delay_ms < 0 || delay_ms > mq_delay_ms_max) {
    return fail(errc::invalid_argument, "a nack delay is 0 to " + std::to_string(mq_delay_ms_max) + " ms");
  }
  auto h = find_held(group, session, partition);
  if (!h) return std::move(h).error();
  auto& ps = *h->state;
  if (generation != ps.generation) {
    return fail(errc::conflict, "the nack carries generation " + std::to_string(generation) + " of " +
                                    describe_partition(partition) + "; it is at " + std::to_string(ps.generation));
  }
  auto it = ps.flying.find(offset);
  if (it == ps.flying.end() || it->second.member != session) {
    return fail(errc::not_found, "offset " + std::to_string(offset) + " of " + describe_partition(partition) +
                                     " is not in flight to this member");
  }
  return give_back(group, *h->group, partition, ps, it, now_ms + delay_ms, log);
}

mq_expired_deliveries mq_groups::expire_deliveries(std::int64_t now_ms, const mq_log& log) {
  mq_expired_deliveries out;
  for (auto& [name, g] : groups_) {
    for (auto& [id, ps] : g.partitions) {
      bool due = false;
      for (auto it = ps.flying.begin(); it != ps.flying.end();) {
        auto next = std::next(it);
        if (it->second.deadline_ms <= now_ms) {
          auto dead = give_back(name, g, id, ps, it, now_ms, log);
          if (dead) out.dead.push_back(std::move(*dead));
          due = due || !dead;
        }
        it = next;
      }
      if (!due || !ps.member) continue;
      auto& m = g.members.at(*ps.member);
      if (m.parked) {
        m.parked = false;
        out.wake.emplace_back(name, *ps.member);
      }
    }
  }
  return out;
}

std::optional<mq_dead_letter> mq_groups::give_back(const std::string& name, group_state& g,
                                                   const mq_partition_id& id, partition_state& ps,
                                                   std::map<std::uint64_t, flight>::iterator it,
                                                   std::int64_t at_ms, const mq_log& log) {
  auto offset = it->first;
  auto deliveries = it->second.deliveries;
  land(g, ps, it);
  if (deliveries < g.config.max_deliveries) {
    ps.redeliver.emplace(offset, redelivery{at_ms, deliveries});
    return std::nullopt;
  }
  settle(name, id, ps, offset);
  auto* shell = log.find(id.topic, id.partition, offset);
  if (shell == nullptr) return std::nullopt;  // retention dropped it already: nothing left to dead-letter
  return mq_dead_letter{name, id, *shell, deliveries};
}

void mq_groups::land(group_state& g, partition_state& ps, std::map<std::uint64_t, flight>::iterator it) {
  // A member that left is gone already, with its count.
  if (auto m = g.members.find(it->second.member); m != g.members.end()) {
    SLUICE_ASSERT(m->second.in_flight > 0);
    m->second.in_flight -= 1;
  }
  ps.flying.erase(it);
}

void mq_groups::settle(const std::string& name, const mq_partition_id& id, partition_state& ps,
                       std::uint64_t offset) {
  SLUICE_ASSERT(offset >= ps.committed);
  SLUICE_ASSERT(offset < ps.next);
  auto inserted = ps.acked.insert(offset).second;
  SLUICE_ASSERT(inserted);
  advance(name, id, ps);
}

void mq_groups::advance(const std::string& name, const mq_partition_id& id, partition_state& ps) {
  auto before = ps.committed;
  while (!ps.acked.empty() && *ps.acked.begin() == ps.committed) {
    ps.acked.erase(ps.acked.begin());
    ps.committed += 1;
  }
  if (ps.committed != before) record_offset(name, id, ps);
}

void mq_groups::catch_up(const std::string& name, group_state& g, const mq_partition_id& id, partition_state& ps,
                         std::uint64_t start) {
  if (ps.committed >= start) return;
  // Retention dropped these: they can no longer be delivered, so they
  // count as acked (acks still in flight for them are refused).
  while (!ps.flying.empty() && ps.flying.begin()->first < start) land(g, ps, ps.flying.begin());
  ps.acked.erase(ps.acked.begin(), ps.acked.lower_bound(start));
  ps.redeliver.erase(ps.redeliver.begin(), ps.redeliver.lower_bound(start));
  ps.committed = start;
  ps.next = std::max(ps.next, start);
  record_offset(name, id, ps);
  advance(name, id, ps);
}

// Replay.

result<void> mq_groups::seek(const std::string& group, const mq_partition_id& partition, std::uint64_t offset,
                             const mq_log& log) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto& g = it->second;
  auto ps = g.partitions.find(partition);
  if (ps == g.partitions.end()) {
    return fail(errc::not_found, "group '" + group + "' does not read " + describe_partition(partition));
  }
  auto start = log.start_offset(partition.topic, partition.partition);
  if (!start) return std::move(start).error();
  auto end = log.end_offset(partition.topic, partition.partition);
  if (!end) return std::move(end).error();
  if (offset < *start || offset > *end) {
    return fail(errc::invalid_argument, "offset " + std::to_string(offset) + " is outside the log of " +
                                            describe_partition(partition) + ", which holds " + std::to_string(*start) +
                                            " to " + std::to_string(*end));
  }
  auto& s = ps->second;
  while (!s.flying.empty()) land(g, s, s.flying.begin());
  s.acked.clear();
  s.redeliver.clear();
  s.committed = s.next = offset;
  record_offset(group, partition, s);
  return {};
}

result<void> mq_groups::seek_time(const std::string& group, const mq_partition_id& partition, std::int64_t time_ms,
                                  const mq_log& log) {
  auto offset = log.offset_at_time(partition.topic, partition.partition, time_ms);
  if (!offset) return std::move(offset).error();
  return seek(group, partition, *offset, log);
}

// Views.

result<mq_lag> mq_groups::lag(const std::string& group, const mq_partition_id& partition, const mq_log& log) const {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto ps = it->second.partitions.find(partition);
  if (ps == it->second.partitions.end()) {
    return fail(errc::not_found, "group '" + group + "' does not read " + describe_partition(partition));
  }
  auto start = log.start_offset(partition.topic, partition.partition);
  if (!start) return std::move(start).error();
  auto end = *log.end_offset(partition.topic, partition.partition);
  auto from = std::max(ps->second.committed, *start);
  if (from >= end) return mq_lag{};
  mq_lag out{end - from, *log.bytes_between(partition.topic, partition.partition, from, end)};
  for (auto a = ps->second.acked.lower_bound(from); a != ps->second.acked.end() && *a < end; ++a) {
    auto* shell = log.find(partition.topic, partition.partition, *a);
    SLUICE_ASSERT(shell != nullptr);
    out.messages -= 1;
    out.bytes -= shell->size_bytes;
  }
  return out;
}

std::map<mq_partition_id, std::uint64_t> mq_groups::consumed_upto(const mq_log& log) const {
  std::map<mq_partition_id, std::uint64_t> out;
  for (auto& [topic, readers] : readers_) {
    auto* config = log.config_of(topic);
    if (config == nullptr) continue;
    for (std::uint32_t p = 0; p < config->partitions; ++p) {
      mq_partition_id id{topic, p};
      auto low = UINT64_MAX;
      for (auto& name : readers) {
        auto& g = groups_.at(name);
        auto ps = g.partitions.find(id);
        // A group that has not looked at the partition yet keeps it all.
        low = std::min(low, ps == g.partitions.end() ? std::uint64_t{0} : ps->second.committed);
      }
      out.emplace(std::move(id), low);
    }
  }
  return out;
}

std::vector<std::string> mq_groups::list() const {
  std::vector<std::string> out;
  for (auto& [name, g] : groups_) out.push_back(name);
  return out;
}

const mq_group_config* mq_groups::config_of(const std::string& group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : &it->second.config;
}

std::vector<mq_partition_id> mq_groups::assigned(const std::string& group, std::uint64_t session) const {
  auto it = groups_.find(group);
  if (it == groups_.end()) return {};
  auto m = it->second.members.find(session);
  if (m == it->second.members.end()) return {};
  return {m->second.partitions.begin(), m->second.partitions.end()};
}

result<mq_partition_view> mq_groups::view(const std::string& group, const mq_partition_id& partition) const {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::not_found, "no group '" + group + "'");
  auto ps = it->second.partitions.find(partition);
  if (ps == it->second.partitions.end()) {
    return fail(errc::not_found, "group '" + group + "' does not read " + describe_partition(partition));
  }
  auto& s = ps->second;
  return mq_partition_view{s.member, s.generation, s.committed, s.next, s.acked.size(), s.flying.size(),
                           s.redeliver.size()};
}

void mq_groups::check_invariants() const {
  for (auto& [name, g] : groups_) {
    std::map<std::uint64_t, std::uint32_t> flying_of;
    for (auto& [session, m] : g.members) {
      SLUICE_ASSERT(m.in_flight <= g.config.prefetch);
      for (auto& id : m.partitions) {
        auto ps = g.partitions.find(id);
        SLUICE_ASSERT(ps != g.partitions.end());
        SLUICE_ASSERT(ps->second.member == session);
      }
    }
    for (auto& [id, ps] : g.partitions) {
      if (ps.member) {
        auto m = g.members.find(*ps.member);
        SLUICE_ASSERT(m != g.members.end());
        SLUICE_ASSERT(m->second.partitions.contains(id));
      }
      SLUICE_ASSERT(ps.committed <= ps.next);
      SLUICE_ASSERT(ps.next - ps.committed <= mq_window_offsets_max);
      SLUICE_ASSERT(ps.acked.size() + ps.flying.size() + ps.redeliver.size() == ps.next - ps.committed);
      for (auto a : ps.acked) {
        SLUICE_ASSERT(a > ps.committed);
        SLUICE_ASSERT(a < ps.next);
      }
      for (auto& [offset, f] : ps.flying) {
        SLUICE_ASSERT(offset >= ps.committed && offset < ps.next);
        SLUICE_ASSERT(!ps.acked.contains(offset));
        SLUICE_ASSERT(ps.member == f.member);
        SLUICE_ASSERT(f.generation == ps.generation);
        flying_of[f.member] += 1;
      }
      for (auto& [offset, r] : ps.redeliver) {
        SLUICE_ASSERT(offset >= ps.committed && offset < ps.next);
        SLUICE_ASSERT(!ps.acked.contains(offset));
        SLUICE_ASSERT(!ps.flying.contains(offset));
      }
    }
    for (auto& [session, m] : g.members) SLUICE_ASSERT(flying_of[session] == m.in_flight);
  }
}

// Persistence.

std::vector<mq_group_change> mq_groups::drain_changes() {
  offset_records_.clear();
  return std::exchange(changes_, {});
}

void mq_groups::record(mq_group_change change) {
  SLUICE_ASSERT(changes_.size() < mq_group_changes_max);
  changes_.push_back(std::move(change));
}

void mq_groups::record_offset(const std::string& name, const mq_partition_id& id, const partition_state& ps) {
  auto key = std::pair{name, id};
  if (auto it = offset_records_.find(key); it != offset_records_.end()) {
    auto& rec = std::get<mq_offset_changed>(changes_.at(it->second));
    rec.committed = ps.committed;
    rec.generation = ps.generation;
    return;
  }
  offset_records_.emplace(std::move(key), changes_.size());
  record(mq_offset_changed{name, id, ps.committed, ps.generation});
}

void mq_groups::forget_offset_records(const std::string& name) {
  auto it = offset_records_.lower_bound(std::pair{name, mq_partition_id{}});
  while (it != offset_records_.end() && it->first.first == name) it = offset_records_.erase(it);
}

result<void> mq_groups::restore_group(const std::string& group, const mq_group_config& config) {
  if (auto ok = check_mq_name(group, "group"); !ok) return ok.error();
  if (auto ok = check_group_config(config); !ok) return ok.error();
  if (groups_.contains(group)) return fail(errc::invalid_argument, "group '" + group + "' restored twice");
  if (groups_.size() >= mq_groups_max) return fail(errc::invalid_argument, "more groups stored than the limit");
  groups_.emplace(group, group_state{config, {}, {}});
  for (auto& topic : config.topics) readers_[topic].insert(group);
  return {};
}

result<void> mq_groups::restore_offset(const std::string& group, const mq_partition_id& partition,
                                       std::uint64_t committed, std::uint64_t generation) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return fail(errc::invalid_argument, "a stored offset names no group: '" + group + "'");
  auto& g = it->second;
  auto& topics = g.config.topics;
  if (!std::binary_search(topics.begin(), topics.end(), partition.topic) || partition.partition >= mq_partitions_max) {
    return fail(errc::invalid_argument, "group '" + group + "' does not read the stored " +
                                            describe_partition(partition));
  }
  partition_state ps;
  ps.committed = ps.next = committed;
  ps.generation = generation;
  if (!g.partitions.emplace(partition, std::move(ps)).second) {
    return fail(errc::invalid_argument, "the offset of " + describe_partition(partition) + " in group '" + group +
                                            "' is stored twice");
  }
  return {};
}

}  // namespace sluice::master
