// The simulator's fault sites: each SLUICE_BUGGIFY call site is switched
// on or off the first time a run reaches it (a quarter of the sites are
// on), and an enabled site then fires now and then. Decisions come from
// the run's fault rng, so one seed gives one set of faults.
#pragma once

#include <map>
#include <string>

#include "runtime/buggify.hpp"
#include "runtime/rng.hpp"

namespace sluice::sim {

class sim_fault_sites final : public fault_sites {
 public:
  sim_fault_sites(rng random, bool enabled) : random_(random), enabled_(enabled) {}

  bool fire(std::string_view site) override {
    if (!enabled_) return false;
    auto [it, first] = sites_.try_emplace(std::string{site});
    if (first) it->second.on = random_.chance(1, 4);
    if (!it->second.on || !random_.chance(fire_pm, 1000)) return false;
    it->second.fired += 1;
    return true;
  }

  /// Stops every site (the liveness phase runs without injected faults).
  void disable() { enabled_ = false; }

  struct site_state {
    bool on = false;
    std::uint64_t fired = 0;
  };
  const std::map<std::string, site_state, std::less<>>& sites() const { return sites_; }

 private:
  static constexpr std::uint64_t fire_pm = 50;
  rng random_;
  bool enabled_;
  std::map<std::string, site_state, std::less<>> sites_;
};

}  // namespace sluice::sim
