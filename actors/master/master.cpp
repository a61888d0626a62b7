#include "actors/master/master.hpp"
#include "actors/master/master_state.hpp"

#include <algorithm>
#include <limits>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/assert.hpp"
#include "runtime/overloaded.hpp"
#include "actors/master/directory.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/persistence.hpp"
#include "actors/master/placement.hpp"
#include "actors/master/registry.hpp"
#include "runtime/units.hpp"

namespace sluice {
namespace master_detail {

std::string describe_owner(const master::member& m) {
  return "owner '" + m.name + "' (" + m.id.to_string() + ")";
}

// --- durability -------------------------------------------------------------
//
// The master answers nothing that depends on a change before that change
// is durable: while changes wait for a sync, every reply and every drop
// it would send waits with them. The sync runs once the mailbox holds
// nothing older than it, so a burst of requests shares one (group commit).

void changed(self_ptr self) {
  auto& st = self->state;
  if (!st.journal->dirty() || st.sync_queued) return;
  st.sync_queued = true;
  self->send(self, sync_atom::value);
}

void when_durable(self_ptr self, std::function<void()> send) {
  auto& st = self->state;
  if (!st.journal->dirty()) return send();
  st.held.push_back(std::move(send));
}

void answer(self_ptr self, const request_context& ctx, wire::body body) {
  when_durable(self, [self, ctx, body = std::move(body)]() mutable {
    self->state.ep->reply(ctx, std::move(body));
  });
}

void answer_error(self_ptr self, const request_context& ctx, error err) {
  when_durable(self, [self, ctx, err = std::move(err)] { self->state.ep->reply_error(ctx, err); });
}

void tell_drop(self_ptr self, const master::stale_version& s) {
  when_durable(self, [self, s] {
    auto& st = self->state;
    auto* m = st.members.find(s.holder);
    if (m == nullptr || m->state != wire::member_state::up) return;  // it lost its data or will reconcile
    // Asked, not told: the owner's route may change under it (its own link
    // lost, a relay gone), and a drop that never arrives leaves bytes no
    // key names until the owner registers again.
    ask_member(self, *m, wire::drop{s.key, s.version}, st.ep->now() + drop_timeout, [](result<wire::message>) {});
  });
}

void ask_member(self_ptr self, const master::member& m, wire::body body, clock_time deadline,
                reply_handler on_reply) {
  auto& st = self->state;
  auto id = m.id;
  auto again = [self, id, body, deadline, on_reply](error why) mutable {
    // The route was lost (no link, its link gone, a relay that cannot pass
    // it on): the owner comes by another way with its next request, which
    // moves its route; ask again on that one while time remains.
    auto& st = self->state;
    if (st.ep->now() + member_route_retry >= deadline) return on_reply(std::move(why));
    auto wait = st.next_waiting++;
    st.waiting.emplace(wait, [self, id, body = std::move(body), deadline, on_reply = std::move(on_reply), why]() mutable {
      auto* m = self->state.members.find(id);
      if (m == nullptr || m->state != wire::member_state::up) return on_reply(std::move(why));
      ask_member(self, *m, std::move(body), deadline, std::move(on_reply));
    });
    self->delayed_send(self, member_route_retry, resume_atom::value, wait);
  };
  if (m.link == 0) return again(error{errc::unavailable, "no route to " + describe_owner(m) + " now"});
  // Each try is short: a link gone quiet (a cut path, a relay whose own
  // link went quiet) holds what it was given, while the owner already
  // comes another way, which its next request shows.
  auto attempt_until = std::min(deadline, st.ep->now() + member_attempt_timeout);
  st.ep->request(m.link, body, {}, attempt_until, request_options{m.via.value != 0 ? m.id : node_id{}, {}},
                 [self, on_reply, again, deadline](result<wire::message> reply, bool path_failed) mutable {
                   bool lost = path_failed && (reply.code() == errc::unavailable ||
                                               (reply.code() == errc::timeout && self->state.ep->now() < deadline));
                   if (lost) return again(reply.error());
                   on_reply(std::move(reply));
                 });
}


}  // namespace master_detail

namespace {

using namespace master_detail;
using master::directory;
using master::membership;
using master::persistence;

/// How long the master waits before it tries again a sync its store
/// refused for now.
constexpr std::chrono::milliseconds sync_retry{20};
/// Keys one listing returns when the request names no limit, and at most.
constexpr std::uint32_t list_limit_default = 1000;
constexpr std::uint32_t list_limit_max = 10000;
/// Expired keys taken out per tick, at most.
constexpr std::size_t expire_batch = 10000;
/// Owners listed to each owner as relays to the master, at most: a few
/// are enough to find one that works, and each membership change sends
/// every owner its list once.
constexpr std::size_t relays_listed_max = 16;

/// Starts the master's state over from what its store holds, as a
/// restart would: members come back down until they register again.
result<master::recovery_stats> load_state(self_ptr self) {
  auto& st = self->state;
  st.dir = directory{};
  st.members = membership{};
  st.members.set_generation(st.random->next());
  st.pins = master::pin_table{};
  st.slots = master::homes{};
  st.commits = master::owner_commit_log{};
  // An expiry in flight waited for answers a reload drops (held replies,
  // invalidations): the key would stay marked forever and never expire.
  // The expiry tick and the MQ orphan sweep start what is still due again.
  st.expiring.clear();
  std::vector<master::member> members;
  auto stats = st.journal->load(st.dir, members, &st.pins, &st.slots, &st.commits);
  if (!stats) return stats;
  st.mq = master::mq_log{};
  st.mq_groups = master::mq_groups{};
  if (st.plant_mq_forget_acks_on_move) st.mq_groups.plant_forget_acks_on_move();
  mq_reloaded(self);
  if (auto mq = st.journal->load_mq(st.mq, st.mq_groups); !mq) return mq.error();
  for (auto& m : members) st.members.restore(std::move(m), st.ep->now());
  return stats;
}

void on_sync(self_ptr self) {
  auto& st = self->state;
  st.sync_queued = false;
  auto ok = st.journal->sync();
  if (!ok && ok.code() == errc::unavailable) {
    // Nothing is lost yet: try again shortly; what waits keeps waiting.
    if (!st.sync_warned) st.ep->log()->warn("the master's store refused a sync ({}); retrying", ok.error().to_string());
    st.sync_warned = true;
    st.sync_queued = true;
    self->delayed_send(self, timer_delay(st.ep->faults(), sync_retry), sync_atom::value);
    return;
  }
  if (!ok) {
    // Changes the master made are lost: forget them, and everything that
    // waited on them, and carry on from what is durable.
    st.ep->log()->error("the master lost changes it could not persist ({}); reloading its durable state",
                        ok.error().to_string());
    st.journal->discard();
    st.held.clear();
    if (auto loaded = load_state(self); !loaded) {
      st.ep->log()->critical("the master cannot reload its state: {}", loaded.error().to_string());
      self->quit(caf::exit_reason::user_shutdown);
    }
    return;
  }
  st.sync_warned = false;
  auto held = std::exchange(st.held, {});
  for (auto& send : held) send();
}

/// An owner's fast index may answer for this long after it sent a
/// heartbeat the master answered; half the heartbeat timeout, so the
/// master declares a silent owner down only after its lease ran out.
std::uint64_t lease_us(const master_section& cfg) {
  return static_cast<std::uint64_t>(cfg.heartbeat_timeout.count()) / 2;
}

}  // namespace

void master_detail::after_lease(self_ptr self, node_id holder, std::function<void()> then) {
  auto& st = self->state;
  auto* m = st.members.find(holder);
  if (m == nullptr) return then();
  auto until = m->last_heartbeat + std::chrono::microseconds{lease_us(st.cfg)};
  auto now = st.ep->now();
  if (until <= now) return then();
  auto id = st.next_waiting++;
  st.waiting.emplace(id, std::move(then));
  self->delayed_send(self, until - now, resume_atom::value, id);
}

namespace {

/// Forgets every object `holder` held: it lost them.
void drop_holder(self_ptr self, node_id holder, const char* why) {
  auto& st = self->state;
  std::vector<std::string> kept;
  auto keys = st.dir.remove_holder(holder, &kept);
  for (auto& key : keys) {
    st.journal->object_removed(key);
    key_gone(self, key);
  }
  for (auto& key : kept) {
    st.journal->object_committed(key, *st.dir.find_any(key));
    repair_check(self, key);
  }
  if (!keys.empty()) {
    st.ep->log()->info("dropped {} objects of owner {}: {}", keys.size(), holder.to_string(), why);
  }
  forget_owner_commits(self, holder);
  changed(self);
}

/// A new owner took the name of member `old`, which is down: once the
/// old one surely stopped serving, it and its objects are forgotten.
void replace_member(self_ptr self, node_id old) {
  after_lease(self, old, [self, old] {
    auto& st = self->state;
    auto* m = st.members.find(old);
    if (m == nullptr || m->state == wire::member_state::up) return;  // it came back
    st.ep->log()->info("{} was replaced by a new owner of that name; forgetting it", describe_owner(*m));
    drop_holder(self, old, "replaced");
    st.members.forget(old);
    st.journal->member_forgotten(old);
    changed(self);
  });
}

wire::cluster_status_reply status_of(master_state& st) {
  wire::cluster_status_reply out;
  out.master = st.ep->me().id;
  out.object_count = st.dir.object_count();
  out.repair.under_replicated = st.repair.under_replicated();
  out.repair.without_live_copy = st.repair.stranded_count();
  out.repair.copies_in_flight = st.repair.in_flight_count();
  out.repair.copies_made = st.repair.copies_made();
  out.repair.bytes_copied = st.repair.bytes_copied();
  out.repair.copies_failed = st.repair.copies_failed();
  auto now = st.ep->now();
  for (auto& [id, m] : st.members.all()) {
    auto usage = st.dir.usage_of(id);
    wire::member_status s;
    s.id = id;
    s.member_role = role::owner;
    s.name = m.name;
    s.address = m.address;
    s.state = m.state;
    s.capacity_bytes = m.capacity_bytes;
    s.used_bytes = usage.bytes;
    s.object_count = usage.objects;
    s.evictions = m.evictions;
    s.stored_bytes = m.used_bytes;
    s.stored_objects = m.reported_objects;
    s.home_slots = static_cast<std::uint32_t>(st.slots.count_of(id));
    s.own_commits = st.commits.applied(id);
    s.under_replicated_puts = m.under_replicated_puts;
    s.links = m.links;
    if (m.state == wire::member_state::up) s.master_via = m.via;
    s.last_heartbeat_age_us =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - m.last_heartbeat).count());
    out.members.push_back(std::move(s));
  }
  return out;
}

void on_register(self_ptr self, const request_context& ctx, const peer_info& peer,
                 const wire::register_owner& r) {
  auto& st = self->state;
  if (peer.peer_role != role::owner) {
    answer_error(self, ctx, error{errc::invalid_argument, "only owners register with the master"});
    return;
  }
  const auto* known = st.members.find(ctx.source);
  bool record = known == nullptr || known->incarnation != r.incarnation || known->name != r.name ||
                known->address != r.address || known->capacity_bytes != r.capacity_bytes;
  if (known != nullptr && known->incarnation != r.incarnation) {
    // The same owner, started again: what it held is gone.
    drop_holder(self, ctx.source, "it restarted");
  }
  // The owner's own commits before commits_from were applied by a master:
  // if this one does not know of them, it lost its storage, and they are
  // gone with the rest (the owner's inventory frees them).
  if (r.commits_from > st.commits.applied(ctx.source) + 1) {
    st.commits.set_applied(ctx.source, r.commits_from - 1);
    st.journal->owner_commits_applied(ctx.source, r.commits_from - 1);
    changed(self);
  }
  // A down member of that name was replaced; so was one still up only for
  // the grace after its own link was lost (the process died and a new one
  // took its place before the grace ran out).
  std::vector<node_id> replaced;
  for (auto& [id, m] : st.members.all()) {
    if (id == ctx.source || m.name != r.name) continue;
    if (m.state != wire::member_state::up || m.lost_link_by) replaced.push_back(id);
  }
  for (auto id : replaced) {
    if (st.members.mark_down(id, "replaced")) {
      st.ep->log()->warn("{} down: a new owner of that name registered", describe_owner(*st.members.find(id)));
      if (st.on_member_down) st.on_member_down(id, "replaced");
    }
    replace_member(self, id);
  }
  auto via = peer.id == ctx.source ? node_id{} : peer.id;
  if (!st.members.join(ctx.source, r.name, r.address, ctx.link, r.capacity_bytes, r.incarnation,
                       st.ep->now(), r.evicts, via)) {
    answer_error(self, ctx, error{errc::overloaded, "the master's member table is full"});
    return;
  }
  if (record) {
    st.journal->member_joined(*st.members.find(ctx.source));
    changed(self);
  }
  st.ep->log()->info("owner '{}' ({}) up at {}, capacity {}{}", r.name, ctx.source.to_string(),
                     r.address, format_size(r.capacity_bytes),
                     via.value == 0 ? std::string{} : ", reaching the master through " + via.to_string());
  auto interval_us = static_cast<std::uint64_t>(st.cfg.heartbeat_interval.count());
  answer(self, ctx, wire::register_owner_reply{interval_us, lease_us(st.cfg)});
}

/// Answers with what `read` finds once every other owner's own commits are
/// in the directory (listing and counting see every key).
void with_all_commits(self_ptr self, const request_context& ctx, std::function<wire::body()> read) {
  with_all_settled(self, ctx.source, ctx.deadline, [self, ctx, read = std::move(read)](result<void> ok) {
    if (!ok) return answer_error(self, ctx, ok.error());
    self->state.dir.advance(self->state.wall_ms());
    answer(self, ctx, read());
  });
}

void dispatch(self_ptr self, transport::link_id link, wire::message msg);

/// Whether the answer to `body` depends on the directory — so it must see
/// the sender's own commits first. Registration, heartbeats and the
/// commits themselves do not (they are how the commits get here), nor
/// does the RPC registry.
bool reads_directory(const wire::body& body) {
  return !(std::holds_alternative<wire::register_owner>(body) || std::holds_alternative<wire::heartbeat>(body) ||
           std::holds_alternative<wire::owner_commits>(body) || std::holds_alternative<wire::leave>(body) ||
           std::holds_alternative<wire::cluster_status>(body) || std::holds_alternative<wire::rpc>(body));
}

void on_request(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  // An owner's request that follows commits it made itself waits until
  // they are applied, so it sees them (they may arrive late or be sent
  // again).
  if (msg.env.after > st.commits.applied(msg.env.source) && reads_directory(msg.env.body)) {
    auto* peer = st.ep->peer(link);
    if (peer != nullptr && peer->peer_role == role::owner) {
      auto ctx = st.ep->context_of(link, msg);
      auto held = std::make_shared<wire::message>(std::move(msg));
      st.commits.wait(ctx.source, held->env.after, ctx.deadline, [self, link, ctx, held](result<void> ok) {
        if (self->state.ep->peer(link) == nullptr) return;  // the link went away meanwhile
        if (!ok) return answer_error(self, ctx, ok.error());
        dispatch(self, link, std::move(*held));
      });
      return;
    }
  }
  dispatch(self, link, std::move(msg));
}

void dispatch(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  st.dir.advance(st.wall_ms());
  auto ctx = st.ep->context_of(link, msg);
  // The endpoint hands on only frames of links it knows, and a request
  // held for commits checks its link again before it comes here.
  const peer_info* known = st.ep->peer(link);
  SLUICE_ASSERT(known != nullptr);
  const peer_info& peer = *known;
  // An owner is reached the way its last request came: its own link, or
  // the owner that relayed it.
  if (peer.peer_role == role::owner && ctx.source.value != 0) {
    st.members.route(ctx.source, link, ctx.source == peer.id ? node_id{} : peer.id);
  }
  std::visit(
      overloaded{
          [&](const wire::register_owner& r) { on_register(self, ctx, peer, r); },
          [&](const wire::heartbeat& h) {
            bool known = st.members.heartbeat(ctx.source, h.used_bytes, h.object_count, st.ep->now(), h.evictions,
                                              h.links, h.under_replicated_puts);
            if (known) {
              auto live = h.sessions;
              std::sort(live.begin(), live.end());
              pins_changed(self, st.pins.keep_sessions(ctx.source, live));
              st.registry.keep_sessions(ctx.source, live);
            }
            // The owner's share of up owners (the relays it may use) goes
            // out only when the owner holds another generation of it.
            wire::heartbeat_reply out{known, st.members.generation(), {}};
            if (known && h.owners_seen != out.owners_generation) {
              out.owners = st.members.relays_for(ctx.source, relays_listed_max);
            }
            answer(self, ctx, std::move(out));
          },
          [&](const wire::place& p) { on_place(self, ctx, p); },
          [&](const wire::commit& c) { on_commit(self, ctx, c); },
          [&](const wire::abort_put& a) { st.dir.abort(a.version); },
          [&](const wire::leave&) {
            if (st.members.leave(ctx.source)) {
              st.ep->log()->info("{} left", describe_owner(*st.members.find(ctx.source)));
            }
          },
          [&](const wire::locate& l) { on_locate(self, ctx, l); },
          [&](const wire::remove_key& r) { on_remove(self, ctx, r); },
          [&](const wire::evict& e) { on_evict(self, ctx, e); },
          [&](const wire::inventory& inv) { on_inventory(self, ctx, inv); },
          [&](const wire::add_replica& r) { on_add_replica(self, ctx, r); },
          [&](const wire::claim& c) { on_claim(self, ctx, c); },
          [&](const wire::owner_commits& c) { on_owner_commits(self, ctx, c); },
          [&](const wire::pin& p) { on_pin(self, ctx, p); },
          [&](const wire::unpin& u) {
            bool was = st.pins.unpin(u.key, u.session, st.wall_ms());
            st.journal->pins_changed(u.key, st.pins.holds(u.key));
            changed(self);
            answer(self, ctx, wire::unpin_reply{was});
          },
          [&](const wire::cluster_status&) { answer(self, ctx, status_of(st)); },
          [&](const wire::list_keys& l) {
            with_all_commits(self, ctx, [self, l]() -> wire::body {
              auto limit = l.limit == 0 ? list_limit_default : std::min(l.limit, list_limit_max);
              auto listed = self->state.dir.list(l.prefix, l.start_after, limit);
              return wire::list_keys_reply{std::move(listed.keys), listed.more};
            });
          },
          [&](const wire::count_keys& c) {
            with_all_commits(self, ctx, [self, c]() -> wire::body {
              return wire::count_keys_reply{self->state.dir.count(c.prefix)};
            });
          },
          [&](const wire::rpc& r) {
            auto out = master::serve_registry(st.registry, ctx.source, peer.peer_role, r, [&st](node_id id) {
              auto* m = st.members.find(id);
              return m != nullptr && m->state == wire::member_state::up ? &m->address : nullptr;
            });
            if (!out) return answer_error(self, ctx, out.error());
            answer(self, ctx, std::move(*out));
          },
          [&](const wire::mq& m) { on_mq(self, ctx, m); },
          [&](const auto& other) {
            answer_error(self, ctx, error{errc::invalid_argument,
                                          "the master does not serve " +
                                              std::string{wire::body_name(wire::body{other})} +
                                              "; send key-value requests to an owner"});
          },
      },
      msg.env.body);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  auto timeout = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_timeout);
  for (auto id : st.members.detect_failures(now, timeout)) {
    auto& m = *st.members.find(id);
    if (m.down_reason == "link lost") {
      st.ep->log()->warn("{} down: its link was lost and nothing came from it since, by any path",
                         describe_owner(m));
    } else {
      st.ep->log()->warn("{} down: no heartbeat for {}", describe_owner(m), format_duration(st.cfg.heartbeat_timeout));
    }
    if (st.on_member_down) st.on_member_down(id, m.down_reason);
  }
  for (auto& s : st.dir.expire(now)) tell_drop(self, s);
  expire_commit_waits(self);
  st.dir.advance(st.wall_ms());
  // Pins of sessions through owners that are down lapse, and so do pins
  // whose time ran out.
  std::vector<node_id> down;
  for (auto& [id, m] : st.members.all()) {
    if (m.state != wire::member_state::up) down.push_back(id);
  }
  for (auto id : down) pins_changed(self, st.pins.drop_owner(id));
  // Instances behind a down owner cannot be reached; it sends them again
  // when it registers.
  for (auto id : down) st.registry.drop_owner(id);
  pins_changed(self, st.pins.prune(st.wall_ms()));
  mq_tick(self);
  repair_tick(self);
  for (auto& [key, version] : st.dir.expired(expire_batch)) {
    if (st.expiring.insert(key).second) expire_key(self, key, version);
  }
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), tick_atom::value);
}

master_actor::behavior_type master_behavior(self_ptr self, master_deps deps,
                                            std::shared_ptr<boot_state> boot) {
  auto& st = self->state;
  st.cfg = deps.config;
  st.random.emplace(deps.seed);
  st.members.set_generation(st.random->next());
  st.on_member_down = std::move(deps.on_member_down);
  st.repair = master::repair_queue{{st.cfg.repair_concurrency, st.cfg.repair_rate_bytes}};
  st.on_forgotten = std::move(deps.on_forgotten);
  st.on_copy_evicted = std::move(deps.on_copy_evicted);
  st.on_repair = std::move(deps.on_repair);
  st.wall_ms = std::move(deps.wall_ms);
  st.ep.emplace(self, *deps.net, deps.identity, get_logger("master"),
                [self](clock_duration d) { self->delayed_send(self, d, sweep_atom::value); },
                deps.faults);
  st.journal.emplace(deps.store);
  st.dir = std::move(boot->dir);
  st.pins = std::move(boot->pins);
  st.slots = std::move(boot->slots);
  st.commits = std::move(boot->commits);
  st.mq = std::move(boot->mq);
  st.mq_groups = std::move(boot->mq_groups);
  st.plant_mq_forget_acks_on_move = deps.plant_mq_forget_acks_on_move;
  if (st.plant_mq_forget_acks_on_move) st.mq_groups.plant_forget_acks_on_move();
  st.plant_mq_keep_consumed_payloads = deps.plant_mq_keep_consumed_payloads;
  st.plant_mq_free_recalled_at_once = deps.plant_mq_free_recalled_at_once;
  st.plant_no_repair = deps.plant_no_repair;
  // Owners it knew are down until they register again; until then their
  // leases may still run (they started before this master did).
  for (auto& m : boot->members) st.members.restore(std::move(m), st.ep->now());
  boot.reset();
  self->delayed_send(self, st.cfg.heartbeat_interval, tick_atom::value);
  return {
      [self](link_up_atom, transport::link_id link, const std::string& peer) {
        self->state.ep->link_up(link, peer);
      },
      [self](inbound_atom, transport::link_id link, wire::message& msg) {
        if (auto request = self->state.ep->inbound(link, std::move(msg))) {
          on_request(self, link, std::move(*request));
        }
      },
      [self](inbound_batch_atom, std::vector<inbound_item>& batch) {
        self->state.ep->inbound_batch(batch, [self](transport::link_id link, wire::message msg) {
          on_request(self, link, std::move(msg));
        });
      },
      [self](link_down_atom, transport::link_id link, const error& reason) {
        auto& st = self->state;
        st.ep->link_down(link, reason);
        auto grace = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_interval * 2);
        for (auto id : st.members.link_lost(link, st.ep->now(), grace)) {
          st.ep->log()->info("{} lost its link ({}); down unless it is heard from within {}",
                             describe_owner(*st.members.find(id)), reason.to_string(), format_duration(st.cfg.heartbeat_interval * 2));
        }
      },
      [self](sweep_atom) { self->state.ep->sweep(); },
      [self](flush_atom) { self->state.ep->flush(); },
      [self](tick_atom) { on_tick(self); },
      [self](sync_atom) { on_sync(self); },
      [self](resume_atom, std::uint64_t id) {
        auto& st = self->state;
        auto it = st.waiting.find(id);
        if (it == st.waiting.end()) return;
        auto then = std::move(it->second);
        st.waiting.erase(it);
        then();
      },
      [self](stop_atom) {
        self->quit();
        return true;
      },
  };
}

}  // namespace

result<master_actor> spawn_master(caf::actor_system& sys, master_deps deps, master_recovery* recovered) {
  if (!deps.wall_ms) return fail(errc::invalid_argument, "the master needs a wall clock (master_deps::wall_ms)");
  auto boot = std::make_shared<boot_state>();
  persistence journal{deps.store};
  auto stats = journal.load(boot->dir, boot->members, &boot->pins, &boot->slots, &boot->commits);
  if (!stats) return stats.error();
  auto mq = journal.load_mq(boot->mq, boot->mq_groups);
  if (!mq) return mq.error();
  if (recovered != nullptr) {
    recovered->objects = stats->objects;
    recovered->members = stats->members;
  }
  return sys.spawn(master_behavior, std::move(deps), std::move(boot));
}

}  // namespace sluice
