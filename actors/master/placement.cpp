#include "actors/master/placement.hpp"

namespace sluice::master {

std::optional<node_id> choose_owner(placement_policy policy, node_id preferred,
                                    const std::vector<placement_candidate>& up,
                                    std::uint64_t size, rng& random) {
  std::vector<node_id> roomy;
  for (auto& c : up) {
    if (c.free_bytes >= size) roomy.push_back(c.id);
  }
  if (roomy.empty()) return std::nullopt;
  if (policy == placement_policy::local_first) {
    for (auto id : roomy) {
      if (id == preferred) return id;
    }
  }
  return roomy[random.uniform(roomy.size())];
}

}  // namespace sluice::master
