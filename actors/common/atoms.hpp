// The atoms and message-type permissions every role actor uses.
//
// Messages between actors of one node never leave the process (our wire
// is Cap'n Proto, not CAF's), so our message types are allowed as "unsafe"
// (not serializable by CAF) instead of each getting an inspect overload.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "runtime/wire/messages.hpp"
#include "sluice/error.hpp"

namespace sluice {

/// One frame of an inbound batch: the link it came on (a transport's
/// link_id) and its decoded message.
struct inbound_item {
  std::uint64_t link = 0;
  wire::message msg;
};

/// A link came up: (link_up_atom, link_id, peer address).
using link_up_atom = caf::atom_constant<caf::atom("link_up")>;
/// A frame arrived: (inbound_atom, link_id, wire::message).
using inbound_atom = caf::atom_constant<caf::atom("inbound")>;
/// Several frames that arrived in one wake-up of a transport, in order:
/// (inbound_batch_atom, std::vector<inbound_item>).
using inbound_batch_atom = caf::atom_constant<caf::atom("inbatch")>;
/// A link went down: (link_down_atom, link_id, error).
using link_down_atom = caf::atom_constant<caf::atom("link_down")>;
/// Expire requests whose deadline passed: (sweep_atom).
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
/// A role's periodic work (heartbeats, failure detection): (tick_atom).
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// Try to reach a peer again: (reconnect_atom).
using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;
/// A call from the embedding API: (api_atom, api_call).
using api_atom = caf::atom_constant<caf::atom("api")>;
/// Continue work that waited for something: (resume_atom, id).
using resume_atom = caf::atom_constant<caf::atom("resume")>;
/// Make what the role changed durable, then send what waited for it:
/// (sync_atom).
using sync_atom = caf::atom_constant<caf::atom("sync")>;
/// Write the frames the endpoint held while its actor was busy:
/// (flush_atom).
using flush_atom = caf::atom_constant<caf::atom("flush")>;
/// The owner's fast path committed puts the master has not heard of:
/// (commits_atom).
using commits_atom = caf::atom_constant<caf::atom("commits")>;
/// Send the owner's unsent commits now: (report_atom).
using report_atom = caf::atom_constant<caf::atom("report")>;
/// An RDMA read the owner posted completed: (rdma_atom, work id, ok,
/// error text); the reads of one transfer are overdue: (rdma_atom, job id).
using rdma_atom = caf::atom_constant<caf::atom("rdma")>;
/// What an owner's GPU pools are, or why it has none: (gpu_atom) →
/// gpu_report (actors/owner/owner.hpp).
using gpu_atom = caf::atom_constant<caf::atom("gpu")>;
/// Stop the role cleanly: (stop_atom) → true once the role has said
/// goodbye to its peers and quit.
using stop_atom = caf::atom_constant<caf::atom("stop")>;

}  // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::wire::message)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<sluice::inbound_item>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::error)
