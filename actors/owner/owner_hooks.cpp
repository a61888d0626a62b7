#include "actors/owner/owner_hooks.hpp"

#include "actors/owner/rpc_relay.hpp"
#include "runtime/assert.hpp"

namespace sluice {

owner_hooks make_owner_hooks(owner_hooks_deps deps) {
  SLUICE_ASSERT(deps.routes != nullptr);
  auto fast = make_fast_path_hooks({.self = deps.self,
                                    .index = std::move(deps.index),
                                    .store = std::move(deps.store),
                                    .now = deps.now,
                                    .report_commits = std::move(deps.report_commits),
                                    .notify = deps.notify});
  return owner_hooks{.fast_path = std::move(fast.fast_path),
                     .on_idle = std::move(fast.on_idle),
                     .relay = make_relay_hook(std::move(deps.routes), deps.self, std::move(deps.now))};
}

}  // namespace sluice
