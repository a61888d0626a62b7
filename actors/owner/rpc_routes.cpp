#include "actors/owner/rpc_routes.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "runtime/assert.hpp"

namespace sluice {
namespace {

rpc_route route_of(rpc_route::kind what) {
  rpc_route r;
  r.what = what;
  return r;
}

}  // namespace

rpc_routes::rpc_routes(std::function<bool(transport::link_id)> shares_pool) : shares_pool_(std::move(shares_pool)) {}

// --- local instances ---------------------------------------------------------

result<void> rpc_routes::serve(const std::string& name, local_instance instance) {
  std::lock_guard guard{mutex_};
  auto& n = names_[name];
  auto [it, inserted] = n.local.insert_or_assign(instance.client, std::move(instance));
  if (inserted && local_count_ >= rpc_local_instances_max) {
    n.local.erase(it);
    if (n.local.empty() && n.remote.empty()) names_.erase(name);
    return fail(errc::overloaded, "this owner serves " + std::to_string(rpc_local_instances_max) +
                                      " rpc instances already");
  }
  if (inserted) ++local_count_;
  SLUICE_ASSERT(local_count_ <= rpc_local_instances_max);
  return {};
}

bool rpc_routes::unserve(const std::string& name, node_id client) {
  std::lock_guard guard{mutex_};
  auto it = names_.find(name);
  if (it == names_.end() || it->second.local.erase(client) == 0) return false;
  SLUICE_ASSERT(local_count_ > 0);
  --local_count_;
  // A name no instance serves is not kept (as learn() keeps none): the
  // table stays bounded by what is served, not by what ever was.
  if (it->second.local.empty() && it->second.remote.empty()) names_.erase(it);
  return true;
}

std::vector<wire::rpc_instance> rpc_routes::live_instances() const {
  std::lock_guard guard{mutex_};
  std::vector<wire::rpc_instance> out;
  for (auto& [name, n] : names_) {
    for (auto& [client, i] : n.local) {
      if (i.live) out.push_back(wire::rpc_instance{name, client, i.client_name, {}, {}, i.max_concurrent, i.stream});
    }
  }
  return out;
}

bool rpc_routes::set_live(const std::vector<std::uint64_t>& live_clients) {
  std::lock_guard guard{mutex_};
  bool changed = false;
  for (auto& [name, n] : names_) {
    for (auto& [client, i] : n.local) {
      bool live = std::binary_search(live_clients.begin(), live_clients.end(), client.value);
      changed |= live != i.live;
      i.live = live;
    }
  }
  return changed;
}

// --- what the master said ----------------------------------------------------

void rpc_routes::learn(const std::string& name, const std::vector<wire::rpc_instance>& instances, node_id self,
                       time_point expires) {
  std::vector<remote_instance> remote;
  for (auto& i : instances) {
    if (i.name == name && i.owner != self) remote.push_back({i.client, i.owner, i.owner_address});
  }
  std::sort(remote.begin(), remote.end(), [](auto& a, auto& b) { return a.client < b.client; });
  std::lock_guard guard{mutex_};
  auto it = names_.find(name);
  // Knowing that a name has no instance at all is not worth keeping: the
  // table stays bounded by what is served, not by what was asked for.
  if (remote.empty() && (it == names_.end() || it->second.local.empty())) {
    if (it != names_.end()) names_.erase(it);
    return;
  }
  auto& n = it == names_.end() ? names_[name] : it->second;
  n.remote = std::move(remote);
  n.known_until = expires;
}

void rpc_routes::forget_remote(const std::string& name, node_id client) {
  std::lock_guard guard{mutex_};
  auto it = names_.find(name);
  if (it == names_.end()) return;
  std::erase_if(it->second.remote, [client](const remote_instance& r) { return r.client == client; });
}

std::vector<std::string> rpc_routes::to_refresh(time_point before) {
  std::lock_guard guard{mutex_};
  std::vector<std::string> out;
  for (auto& [name, n] : names_) {
    if (n.used && n.known_until < before) out.push_back(name);
    n.used = false;
  }
  return out;
}

// --- routing -----------------------------------------------------------------

std::vector<rpc_routes::candidate> rpc_routes::candidates(const name_state& n, mode m) const {
  std::vector<candidate> out;
  for (auto& [client, i] : n.local) {
    if (i.live && (m != mode::relay || shares_pool(i.link))) out.push_back({client, &i, nullptr});
  }
  bool with_remote = m == mode::any || m == mode::stale_ok;
  if (!with_remote || n.remote.empty()) return out;  // the map's order: by client id
  for (auto& r : n.remote) {
    // A client known both here and elsewhere moved here: this owner knows.
    if (n.local.find(r.client) == n.local.end()) out.push_back({r.client, nullptr, &r});
  }
  std::sort(out.begin(), out.end(), [](const candidate& a, const candidate& b) { return a.client < b.client; });
  return out;
}

std::size_t rpc_routes::pick(const std::vector<candidate>& c, wire::rpc_routing routing, std::uint64_t start) const {
  SLUICE_ASSERT(!c.empty());
  auto first = static_cast<std::size_t>(start % c.size());
  if (routing == wire::rpc_routing::round_robin) return first;
  // Least outstanding; among equals, the next in round-robin order, so
  // idle instances still take turns.
  std::size_t best = first;
  auto best_load = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t k = 0; k < c.size(); ++k) {
    auto at = (first + k) % c.size();
    auto it = outstanding_.find(c[at].client);
    auto load = it == outstanding_.end() ? 0 : it->second;
    if (load < best_load) {
      best = at;
      best_load = load;
    }
  }
  return best;
}

bool rpc_routes::all_share_pool(const name_state& n) const {
  for (auto& [client, i] : n.local) {
    if (i.live && !shares_pool(i.link)) return false;
  }
  return true;
}

rpc_route rpc_routes::to_route(const candidate& c) {
  SLUICE_ASSERT((c.local == nullptr) != (c.remote == nullptr));
  ++outstanding_[c.client];
  auto r = route_of(c.local != nullptr ? rpc_route::kind::local : rpc_route::kind::remote);
  r.client = c.client;
  if (c.local != nullptr) {
    r.link = c.local->link;
  } else {
    r.owner = c.remote->owner;
    r.owner_address = c.remote->owner_address;
  }
  return r;
}

rpc_route rpc_routes::route(std::string_view name, node_id target, wire::rpc_routing routing, time_point now,
                            mode m) {
  std::lock_guard guard{mutex_};
  auto it = names_.find(name);
  bool fresh = it != names_.end() && now < it->second.known_until;
  bool known = fresh || m == mode::stale_ok;
  if (it == names_.end()) return route_of(m == mode::any ? rpc_route::kind::lookup : rpc_route::kind::none);
  auto& n = it->second;
  n.used = true;
  if (target != node_id{}) {
    // A caller that names the client gets it, live session or not: it
    // asked for that one.
    if (auto l = n.local.find(target); l != n.local.end()) {
      if (m == mode::relay && !shares_pool(l->second.link)) return route_of(rpc_route::kind::none);
      return to_route({target, &l->second, nullptr});
    }
    if (m == mode::local_only || m == mode::relay) return route_of(rpc_route::kind::none);
    if (!known) return route_of(rpc_route::kind::lookup);
    for (auto& r : n.remote) {
      if (r.client == target) return to_route({target, nullptr, &r});
    }
    return route_of(rpc_route::kind::none);
  }
  if (m == mode::any && !known) return route_of(rpc_route::kind::lookup);
  // The poller routes a call to any instance only when every instance is
  // local and known to be: otherwise round robin across hosts is the
  // actor's to keep.
  if (m == mode::relay && (!fresh || !n.remote.empty() || !all_share_pool(n))) return route_of(rpc_route::kind::none);
  auto c = candidates(n, m);
  if (c.empty()) return route_of(rpc_route::kind::none);
  auto at = pick(c, routing, n.next);
  SLUICE_ASSERT(at < c.size());
  n.next = at + 1;
  return to_route(c[at]);
}

void rpc_routes::finished(node_id client) {
  std::lock_guard guard{mutex_};
  auto it = outstanding_.find(client);
  if (it == outstanding_.end()) return;
  SLUICE_ASSERT(it->second > 0);
  if (--it->second == 0) outstanding_.erase(it);
}

// --- relays ------------------------------------------------------------------

bool rpc_routes::first_time(transport::link_id link, std::uint64_t id) {
  std::lock_guard guard{mutex_};
  return seen_[link].first_time(id);
}

std::optional<std::uint64_t> rpc_routes::add_relay(rpc_relay r) {
  std::lock_guard guard{mutex_};
  if (relays_.size() >= rpc_relays_max) return std::nullopt;
  SLUICE_ASSERT((next_relay_ & rpc_relay_bit) == 0);
  r.id = rpc_relay_bit | next_relay_++;
  auto id = r.id;
  // A caller's request is relayed once (first_time() drops repeats).
  auto [caller, fresh] = relay_of_caller_.try_emplace({r.caller_link, r.caller_request}, id);
  SLUICE_ASSERT(fresh);
  auto [relay, inserted] = relays_.emplace(id, std::move(r));
  SLUICE_ASSERT(inserted);
  SLUICE_ASSERT(relay_of_caller_.size() == relays_.size());
  return id;
}

std::optional<rpc_relay> rpc_routes::take_relay(std::uint64_t id, transport::link_id from) {
  std::lock_guard guard{mutex_};
  auto it = relays_.find(id);
  if (it == relays_.end() || it->second.handler_link != from) return std::nullopt;
  auto r = std::move(it->second);
  relays_.erase(it);
  auto erased = relay_of_caller_.erase({r.caller_link, r.caller_request});
  SLUICE_ASSERT(erased == 1);
  SLUICE_ASSERT(relay_of_caller_.size() == relays_.size());
  return r;
}

std::optional<rpc_relay> rpc_routes::take_relay_of_caller(transport::link_id caller_link, std::uint64_t request) {
  std::lock_guard guard{mutex_};
  auto it = relay_of_caller_.find({caller_link, request});
  if (it == relay_of_caller_.end()) return std::nullopt;
  auto r = relays_.find(it->second);
  relay_of_caller_.erase(it);
  SLUICE_ASSERT(r != relays_.end());
  auto out = std::move(r->second);
  relays_.erase(r);
  SLUICE_ASSERT(relay_of_caller_.size() == relays_.size());
  return out;
}

std::size_t rpc_routes::name_count() const {
  std::lock_guard guard{mutex_};
  return names_.size();
}

std::size_t rpc_routes::relay_count() const {
  std::lock_guard guard{mutex_};
  return relays_.size();
}

// --- buffers -----------------------------------------------------------------

result<std::uint64_t> rpc_routes::add_buffer(node_id client, transport::link_id link, shared_bytes bytes) {
  std::lock_guard guard{mutex_};
  auto& held = buffers_per_link_[link];
  if (held >= rpc_buffers_per_link_max) {
    return fail(errc::overloaded, "this link holds " + std::to_string(rpc_buffers_per_link_max) +
                                      " unsent rpc buffers already");
  }
  ++held;
  auto id = next_buffer_++;
  SLUICE_ASSERT(id != 0);
  auto [at, inserted] = buffers_.emplace(id, buffer{client, link, std::move(bytes)});
  SLUICE_ASSERT(inserted);
  return id;
}

std::optional<shared_bytes> rpc_routes::take_buffer(std::uint64_t id, node_id client) {
  std::lock_guard guard{mutex_};
  auto it = buffers_.find(id);
  if (it == buffers_.end() || it->second.client != client) return std::nullopt;
  auto bytes = std::move(it->second.bytes);
  auto held = buffers_per_link_.find(it->second.link);
  SLUICE_ASSERT(held != buffers_per_link_.end());
  SLUICE_ASSERT(held->second > 0);
  if (--held->second == 0) buffers_per_link_.erase(held);
  buffers_.erase(it);
  return bytes;
}

// --- links and time ------------------------------------------------------------

rpc_routes::link_gone rpc_routes::link_down(transport::link_id link) {
  std::lock_guard guard{mutex_};
  link_gone out;
  for (auto it = names_.begin(); it != names_.end();) {
    auto& local = it->second.local;
    auto before = local.size();
    std::erase_if(local, [link](const auto& e) { return e.second.link == link; });
    if (local.size() != before) {
      out.names.push_back(it->first);
      local_count_ -= before - local.size();
    }
    if (local.empty() && it->second.remote.empty()) {
      it = names_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = relays_.begin(); it != relays_.end();) {
    auto& r = it->second;
    bool to_handler = r.handler_link == link;
    if (!to_handler && r.caller_link != link) {
      ++it;
      continue;
    }
    relay_of_caller_.erase({r.caller_link, r.caller_request});
    if (auto o = outstanding_.find(r.client); o != outstanding_.end() && --o->second == 0) outstanding_.erase(o);
    (to_handler ? out.unanswered : out.abandoned).push_back(std::move(r));
    it = relays_.erase(it);
  }
  std::erase_if(buffers_, [link](const auto& e) { return e.second.link == link; });
  buffers_per_link_.erase(link);
  seen_.erase(link);
  check_counts();
  return out;
}

std::vector<rpc_relay> rpc_routes::expired(time_point now) {
  std::lock_guard guard{mutex_};
  std::vector<rpc_relay> out;
  for (auto it = relays_.begin(); it != relays_.end();) {
    if (it->second.deadline >= now) {
      ++it;
      continue;
    }
    auto& r = it->second;
    relay_of_caller_.erase({r.caller_link, r.caller_request});
    if (auto o = outstanding_.find(r.client); o != outstanding_.end() && --o->second == 0) outstanding_.erase(o);
    out.push_back(std::move(r));
    it = relays_.erase(it);
  }
  SLUICE_ASSERT(relay_of_caller_.size() == relays_.size());
  return out;
}

void rpc_routes::check_counts() const {
  std::size_t instances = 0;
  for (auto& [name, n] : names_) instances += n.local.size();
  SLUICE_ASSERT(instances == local_count_);
  SLUICE_ASSERT(relay_of_caller_.size() == relays_.size());
  auto buffers = std::accumulate(buffers_per_link_.begin(), buffers_per_link_.end(), std::size_t{0},
                                 [](std::size_t sum, const auto& e) { return sum + e.second; });
  SLUICE_ASSERT(buffers == buffers_.size());
  for (auto& [id, o] : outstanding_) SLUICE_ASSERT(o > 0);
}

}  // namespace sluice
