#include "actors/master/registry.hpp"

#include <algorithm>

#include "runtime/rpc_limits.hpp"

namespace sluice::master {

result<void> rpc_registry::sync(node_id owner, std::vector<wire::rpc_instance> instances) {
  std::set<instance_key> keys;
  for (auto& i : instances) {
    if (auto ok = check_rpc_name(i.name); !ok) return ok.error();
    if (!keys.emplace(i.name, i.client).second) {
      return fail(errc::invalid_argument, "client " + i.client.to_string() + " is listed twice for '" + i.name + "'");
    }
  }
  auto old = by_owner_.find(owner);
  auto had = old == by_owner_.end() ? 0 : old->second.size();
  if (total_ - had + instances.size() > rpc_instances_max) {
    return fail(errc::overloaded, "the master's rpc registry is full (" + std::to_string(rpc_instances_max) +
                                      " instances)");
  }
  erase_where(owner, [](const instance_key&) { return true; });
  for (auto& i : instances) {
    i.owner = owner;
    i.owner_address.clear();  // filled in at lookup, from membership
    auto key = instance_key{i.name, i.client};
    // A client moved to this owner (it reconnected elsewhere): the newest
    // sync wins, and the other owner loses the entry.
    if (auto it = instances_.find(key); it != instances_.end()) {
      by_owner_[it->second.owner].erase(key);
      instances_.erase(it);
      --total_;
    }
    instances_.emplace(key, std::move(i));
    by_owner_[owner].insert(key);
    ++total_;
  }
  if (by_owner_[owner].empty()) by_owner_.erase(owner);
  return {};
}

std::size_t rpc_registry::erase_where(node_id owner, const std::function<bool(const instance_key&)>& pred) {
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return 0;
  std::size_t gone = 0;
  for (auto k = it->second.begin(); k != it->second.end();) {
    if (!pred(*k)) {
      ++k;
      continue;
    }
    instances_.erase(*k);
    k = it->second.erase(k);
    ++gone;
  }
  total_ -= gone;
  if (it->second.empty()) by_owner_.erase(it);
  return gone;
}

std::size_t rpc_registry::keep_sessions(node_id owner, const std::vector<std::uint64_t>& live) {
  return erase_where(owner, [&live](const instance_key& k) {
    return !std::binary_search(live.begin(), live.end(), k.second.value);
  });
}

std::size_t rpc_registry::drop_owner(node_id owner) {
  return erase_where(owner, [](const instance_key&) { return true; });
}

std::vector<wire::rpc_instance> rpc_registry::lookup(std::string_view name, bool prefix,
                                                     const owner_address& up) const {
  std::vector<wire::rpc_instance> out;
  for (auto it = instances_.lower_bound(instance_key{std::string{name}, node_id{}});
       it != instances_.end() && out.size() < rpc_lookup_max; ++it) {
    const auto& n = it->first.first;
    if (prefix ? !n.starts_with(name) : n != name) break;
    const auto* address = up(it->second.owner);
    if (address == nullptr) continue;
    out.push_back(it->second);
    out.back().owner_address = *address;
  }
  return out;
}

result<wire::body> serve_registry(rpc_registry& registry, node_id source, role source_role, const wire::rpc& msg,
                                  const rpc_registry::owner_address& up) {
  if (auto* s = std::get_if<wire::rpc_sync>(&msg.body)) {
    if (source_role != role::owner) return fail(errc::invalid_argument, "only owners tell the master what they serve");
    if (auto ok = registry.sync(source, s->instances); !ok) return ok.error();
    return wire::body{wire::ok_reply{}};
  }
  if (auto* l = std::get_if<wire::rpc_lookup>(&msg.body)) {
    if (!l->prefix) {
      if (auto ok = check_rpc_name(l->name); !ok) return ok.error();
    }
    return wire::body{wire::rpc{wire::rpc_instances{registry.lookup(l->name, l->prefix, up)}}};
  }
  return fail(errc::invalid_argument,
              "the master does not serve " + std::string{wire::rpc_body_name(msg.body)} + "; send calls to an owner");
}

}  // namespace sluice::master
