// Fault sites: the places in role code where the real world misbehaves
// (a message that never arrives, a timer that fires late, a write that
// fails). Role code marks them with SLUICE_BUGGIFY(sites); the simulator
// passes a fault_sites that switches each site on or off once per run,
// from the run's seed, and then fires it now and then. Everywhere else
// there is no fault_sites (nullptr) and every site is off: a real node
// never injects a fault.
#pragma once

#include <string_view>

namespace sluice {

class fault_sites {
 public:
  virtual ~fault_sites() = default;
  /// True when the fault at `site` should happen now. `site` names the
  /// call site ("file:line"); it is the same string for every call there.
  virtual bool fire(std::string_view site) = 0;
};

inline bool buggify(fault_sites* sites, std::string_view site) {
  return sites != nullptr && sites->fire(site);
}

}  // namespace sluice

#define SLUICE_BUGGIFY_STRINGIFY2(x) #x
#define SLUICE_BUGGIFY_STRINGIFY(x) SLUICE_BUGGIFY_STRINGIFY2(x)
/// True when the simulator wants a fault here, now. Always false outside it.
#define SLUICE_BUGGIFY(sites) \
  ::sluice::buggify((sites), __FILE__ ":" SLUICE_BUGGIFY_STRINGIFY(__LINE__))
