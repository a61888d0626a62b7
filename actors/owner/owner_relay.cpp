// Relaying: an owner passes on frames that other owners address to a third
// one they cannot reach directly — requests one way, replies the other,
// payloads and all, each frame sent on as it came (only its hop count
// grows). The master counts as such a third node: an owner cut off from it
// sends its control traffic (heartbeats, placements, commits, lookups)
// through another owner, and the master's answers and requests to it
// come back the same way. A relay forwards only over its own direct links, never through
// another relay, so a frame takes at most one forwarding hop and can never
// loop. When it cannot pass a request on, it answers the sender with
// `unavailable` itself; the sender sees that the answer is not the
// addressee's and tries another path.
//
// Invariants (asserted):
//   1. a relay handles only frames for another node: never for 0 (none)
//      and never for itself (the endpoint hands it only those);
//   2. a frame passed on has taken at most relay_hops_max hops before,
//      so it leaves with at most one more;
//   3. at most parked_frames_max frames wait for the member list.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {
namespace {

/// Forwarding hops a frame may have taken when it reaches a relay: one
/// relay between two owners needs none before it, so anything more is a
/// frame going round.
constexpr std::uint8_t relay_hops_max = 0;
/// Frames held while the master is asked where their target is.
constexpr std::size_t parked_frames_max = 1024;

/// Answers a request this relay cannot pass on; anything else is dropped
/// (its requester's deadline catches it).
void refuse(self_ptr self, transport::link_id from, const wire::message& msg, const std::string& why) {
  auto& st = self->state;
  st.ep->log()->debug("relay: {} from {} for {} not passed on: {}", wire::body_name(msg.env.body),
                      msg.env.source.to_string(), msg.env.target.to_string(), why);
  if (msg.env.request_id == 0 || msg.env.reply_to != 0) return;
  wire::envelope answer;
  answer.reply_to = msg.env.request_id;
  answer.source = st.ep->me().id;
  answer.target = msg.env.source;
  answer.body = wire::error_reply{errc::unavailable, "relay " + st.ep->me().name + " cannot reach " +
                                                         msg.env.target.to_string() + ": " + why};
  st.ep->forward(from, answer, {});
}

/// This owner's direct link to `target`, opening one when it knows where
/// the target is; nothing when it does not.
std::optional<result<transport::link_id>> direct_link(self_ptr self, node_id target) {
  auto& st = self->state;
  if (auto link = st.ep->link_to(target)) return result<transport::link_id>{*link};
  auto it = st.owners.find(target);
  if (it == st.owners.end() || it->second.address.empty()) return std::nullopt;
  return owner_link(self, wire::replica{target, it->second.address});
}

/// Passes `msg` on, or refuses it; `may_ask` once per frame: a target not
/// known yet is looked up in the master's member list.
void pass_on(self_ptr self, transport::link_id from, wire::message msg, bool may_ask) {
  auto& st = self->state;
  auto target = msg.env.target;
  SLUICE_ASSERT(msg.env.hops <= relay_hops_max);
  // A link the target greeted on is used whatever this owner's own tries
  // of that path said: the target may have dialed it since (and an answer
  // for it must not be dropped).
  auto live = st.ep->link_to(target);
  if (!live && st.links.health(target.value, transport::path_kind::tcp) == transport::path_health::down) {
    return refuse(self, from, msg, "this owner's own link to it is down");
  }
  auto link = live ? std::optional<result<transport::link_id>>{result<transport::link_id>{*live}} : direct_link(self, target);
  // The master is reached over this owner's own link or not at all: its
  // member list would not say where it is.
  if (!link && target == st.master_id) return refuse(self, from, msg, "this owner has no link to the master now");
  if (!link && may_ask && st.parked.size() < parked_frames_max) {
    st.parked.push_back(parked_frame{from, std::move(msg)});
    SLUICE_ASSERT(st.parked.size() <= parked_frames_max);
    return refresh_owners(self, [self] { release_parked(self); });
  }
  if (!link) return refuse(self, from, msg, "the master does not list it as an up owner");
  if (!*link) return refuse(self, from, msg, link->error().to_string());
  if (**link == from) return refuse(self, from, msg, "it would go back where it came from");
  auto env = msg.env;
  env.hops += 1;
  SLUICE_ASSERT(env.hops <= relay_hops_max + 1);
  st.ep->forward(**link, env, std::move(msg.payload));
}

}  // namespace

void relay_frame(self_ptr self, transport::link_id from, wire::message msg) {
  auto& st = self->state;
  SLUICE_ASSERT(msg.env.target.value != 0);
  SLUICE_ASSERT(msg.env.target != st.ep->me().id);
  const auto* sender = st.ep->peer(from);
  // Only owners relay, and only for owners and the master: clients talk
  // to their own owner.
  if (sender == nullptr || (sender->peer_role != role::owner && sender->peer_role != role::master)) {
    return refuse(self, from, msg, "only owners relay, and only for other owners and the master");
  }
  if (msg.env.hops > relay_hops_max) return refuse(self, from, msg, "it was relayed before (hop limit)");
  pass_on(self, from, std::move(msg), true);
}

void release_parked(self_ptr self) {
  auto parked = std::move(self->state.parked);
  self->state.parked.clear();
  for (auto& p : parked) {
    // The link it came on may be gone: then nobody waits for it.
    if (self->state.ep->peer(p.from) == nullptr) continue;
    pass_on(self, p.from, std::move(p.msg), false);
  }
}

}  // namespace sluice::owner_detail
