// The codec's part for what every link says (hello, ping, ok, error) and
// for an owner's membership with the master: registration, heartbeats, leave.
#include "runtime/wire/codec_membership.hpp"

#include "runtime/assert.hpp"
#include "runtime/wire/codec_detail.hpp"

namespace sluice::wire {

using namespace codec_detail;

// --- encoding ---------------------------------------------------------------

void write_member(s::Envelope::Body::Builder b, const hello& x) {
  auto h = b.initHello();
  h.setRole(to_schema(x.sender_role));
  h.setVersion(x.version);
  h.setName(x.name);
  h.setListenAddress(x.listen_address);
}

void write_member(s::Envelope::Body::Builder b, const error_reply& x) {
  auto e = b.initError();
  e.setCode(static_cast<std::uint16_t>(x.code));
  e.setMessage(x.message);
}

void write_member(s::Envelope::Body::Builder b, const ok_reply&) { b.setOk(); }

void write_member(s::Envelope::Body::Builder b, const register_owner& x) {
  auto r = b.initRegisterOwner();
  r.setName(x.name);
  r.setAddress(x.address);
  r.setCapacityBytes(x.capacity_bytes);
  r.setIncarnation(x.incarnation);
  r.setEvicts(x.evicts);
  r.setCommitsFrom(x.commits_from);
}

void write_member(s::Envelope::Body::Builder b, const register_owner_reply& x) {
  auto r = b.initRegisterOwnerReply();
  r.setHeartbeatIntervalUs(x.heartbeat_interval_us);
  r.setLeaseUs(x.lease_us);
}

void write_member(s::Envelope::Body::Builder b, const heartbeat& x) {
  auto h = b.initHeartbeat();
  h.setUsedBytes(x.used_bytes);
  h.setObjectCount(x.object_count);
  h.setEvictions(x.evictions);
  auto list = h.initSessions(static_cast<unsigned>(x.sessions.size()));
  for (unsigned i = 0; i < x.sessions.size(); ++i) list.set(i, x.sessions[i]);
  write_links(h.initLinks(static_cast<unsigned>(x.links.size())), x.links);
  h.setUnderReplicatedPuts(x.under_replicated_puts);
  h.setOwnersSeen(x.owners_seen);
}

void write_member(s::Envelope::Body::Builder b, const heartbeat_reply& x) {
  auto r = b.initHeartbeatReply();
  r.setKnown(x.known);
  r.setOwnersGeneration(x.owners_generation);
  auto owners = r.initOwners(static_cast<unsigned>(x.owners.size()));
  for (unsigned i = 0; i < x.owners.size(); ++i) {
    owners[i].setId(x.owners[i].id.value);
    owners[i].setName(x.owners[i].name);
    owners[i].setAddress(x.owners[i].address);
  }
}

void write_member(s::Envelope::Body::Builder b, const ping&) { b.setPing(); }

void write_member(s::Envelope::Body::Builder b, const leave&) { b.setLeave(); }

// --- decoding ---------------------------------------------------------------

result<body> read_membership(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::HELLO: {
      auto h = b.getHello();
      return body{hello{from_schema(h.getRole()), h.getVersion(), from_text(h.getName()),
                        from_text(h.getListenAddress())}};
    }
    case W::ERROR: {
      auto e = b.getError();
      auto code = errc_from_wire(e.getCode());
      if (code == errc::ok) return fail(errc::protocol, "error reply with code 0 (ok)");
      return body{error_reply{code, from_text(e.getMessage())}};
    }
    case W::OK: return body{ok_reply{}};
    case W::REGISTER_OWNER: {
      auto r = b.getRegisterOwner();
      return body{register_owner{from_text(r.getName()), from_text(r.getAddress()), r.getCapacityBytes(),
                                 r.getIncarnation(), r.getEvicts(), r.getCommitsFrom()}};
    }
    case W::REGISTER_OWNER_REPLY: {
      auto r = b.getRegisterOwnerReply();
      return body{register_owner_reply{r.getHeartbeatIntervalUs(), r.getLeaseUs()}};
    }
    case W::HEARTBEAT: {
      auto h = b.getHeartbeat();
      heartbeat out{h.getUsedBytes(), h.getObjectCount(), h.getEvictions(), {}, read_links(h.getLinks()),
                    h.getUnderReplicatedPuts(), h.getOwnersSeen()};
      for (auto s : h.getSessions()) out.sessions.push_back(s);
      return body{std::move(out)};
    }
    case W::HEARTBEAT_REPLY: {
      auto r = b.getHeartbeatReply();
      heartbeat_reply out{r.getKnown(), r.getOwnersGeneration(), {}};
      for (auto o : r.getOwners()) {
        out.owners.push_back(owner_address{node_id{o.getId()}, from_text(o.getName()), from_text(o.getAddress())});
      }
      return body{std::move(out)};
    }
    case W::PING: return body{ping{}};
    case W::LEAVE: return body{leave{}};
    default: break;
  }
  // read_body hands this function its own members only.
  SLUICE_ASSERT(false);
}

}  // namespace sluice::wire
