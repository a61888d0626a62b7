#include "actors/owner/owner_hooks.hpp"

#include "actors/owner/rpc_relay.hpp"
#include "runtime/assert.hpp"

namespace sluice {

owner_hooks make_owner_hooks(owner_hooks_deps deps) {
  SLUICE_ASSERT(deps.index != nullptr);
  SLUICE_ASSERT(deps.store != nullptr);
  SLUICE_ASSERT(deps.routes != nullptr);
  SLUICE_ASSERT(deps.now != nullptr);
  SLUICE_ASSERT(deps.report_commits != nullptr);
  auto shared = std::make_shared<const owner_hooks_deps>(std::move(deps));
  owner_hooks hooks;
  hooks.fast_path = [d = shared](transport::link_id link, const wire::inbound_frame& frame,
                                 std::optional<wire::message>& decoded) -> std::optional<transport::fast_taken> {
    auto answer = serve_fast(*d->index, d->store.get(), d->self, link, frame, d->now(), &decoded);
    if (!answer) return std::nullopt;
    bool tell = d->notify == commit_notify::when_idle ? answer->commits_waiting : d->index->notify_due();
    if (tell) d->report_commits();
    return transport::fast_taken{std::move(answer->reply)};
  };
  if (shared->notify == commit_notify::when_idle) {
    hooks.on_idle = [d = shared] {
      if (d->index->notify_due()) d->report_commits();
    };
  }
  hooks.relay = [d = shared](transport::link_id from, const wire::inbound_frame& frame) {
    return relay_rpc(*d->routes, d->self, from, frame, d->now());
  };
  return hooks;
}

}  // namespace sluice
