// A node's identity across restarts: kept in its durable store, so a node
// that restarts with its storage is the same node to the cluster, and one
// whose storage was wiped is a new one.
#pragma once

#include "runtime/node_id.hpp"
#include "runtime/rng.hpp"
#include "runtime/storage/durable_store.hpp"

namespace sluice {

/// The id stored in `store`, or a new one drawn from `random` and stored
/// (and synced) when there is none.
inline result<node_id> load_or_create_node_id(durable_store& store, rng& random) {
  constexpr std::string_view key = "node/id";
  auto stored = store.get(key);
  if (!stored) return stored.error();
  if (*stored) {
    if (auto id = node_id::parse(**stored)) return *id;
    return fail(errc::internal, "the stored node id '" + **stored + "' is corrupt");
  }
  node_id id{random.next() | 1};
  if (auto ok = store.put(key, id.to_string()); !ok) return ok.error();
  if (auto ok = store.sync(); !ok) return ok.error();
  return id;
}

}  // namespace sluice
