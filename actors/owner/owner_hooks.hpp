// owner_hooks: what an owner hands its transports to run on their own
// threads, without the owner actor — the fast path and the hook a poller
// runs when it goes idle (make_fast_path_hooks, fast_path.hpp), and the
// RPC relay between the owner's clients (make_relay_hook, rpc_relay.hpp).
// One function composes them for every node builder: the launcher and the
// embedding API (api/src/node_host.cpp) and the simulator's world
// (sim/world.cpp), so the owner they run is the same owner.
//
// Plain code: the clock and the way to reach the owner actor are passed
// in. The hooks are called on a transport's thread (the shm poller, the
// tcp I/O thread; the simulator's one thread) and never block.
#pragma once

#include <functional>
#include <memory>

#include "actors/owner/fast_path.hpp"
#include "actors/owner/object_store.hpp"
#include "actors/owner/rpc_routes.hpp"
#include "runtime/node_id.hpp"
#include "transports/transport.hpp"

namespace sluice {

struct owner_hooks_deps {
  node_id self;
  /// Shared with the owner actor, which publishes into it.
  std::shared_ptr<fast_index> index;
  /// The owner's values (thread-safe: the fast path reads and writes it too).
  std::shared_ptr<object_store> store;
  /// The RPC routes the owner actor keeps and the relay follows.
  std::shared_ptr<rpc_routes> routes;
  /// The owner actor's clock (leases are checked against it).
  std::function<fast_index::time_point()> now;
  /// Tells the owner actor that reports wait (a commits_atom). Any thread.
  std::function<void()> report_commits;
  commit_notify notify = commit_notify::when_idle;
};

struct owner_hooks {
  transport::fast_path_fn fast_path;
  /// For transports that go idle; empty with commit_notify::after_each_request.
  std::function<void()> on_idle;
  transport::relay_fn relay;
};

/// REQUIRES: every member of `deps` is set.
owner_hooks make_owner_hooks(owner_hooks_deps deps);

}  // namespace sluice
