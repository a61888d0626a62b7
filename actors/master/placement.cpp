#include "actors/master/placement.hpp"

namespace sluice::master {

std::optional<node_id> choose_owner(placement_policy policy, node_id preferred,
                                    const std::vector<placement_candidate>& up,
                                    std::uint64_t size, rng& random) {
  std::vector<const placement_candidate*> roomy;
  for (auto& c : up) {
    if (c.free_bytes >= size) roomy.push_back(&c);
  }
  if (roomy.empty()) {
    for (auto& c : up) {
      if (c.evicts && c.capacity_bytes >= size) roomy.push_back(&c);
    }
  }
  if (roomy.empty()) return std::nullopt;
  switch (policy) {
    case placement_policy::local_first:
      for (auto* c : roomy) {
        if (c->id == preferred) return c->id;
      }
      break;
    case placement_policy::most_free: {
      const placement_candidate* best = roomy.front();
      for (auto* c : roomy) {
        if (c->free_bytes > best->free_bytes) best = c;
      }
      return best->id;
    }
    case placement_policy::random: break;
  }
  return roomy[random.uniform(roomy.size())]->id;
}

}  // namespace sluice::master
