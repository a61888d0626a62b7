// Driving a simulated world from a test: a request sent through one of its
// clients, run until answered, and how one owner reaches another as the
// master's status says. Shared by the simulator tests that stage a small
// cluster by hand.
#pragma once

#include <caf/send.hpp>

#include <memory>
#include <optional>
#include <utility>

#include "actors/client/client.hpp"
#include "sim/world.hpp"

namespace sluice::sim::test {

using namespace std::chrono_literals;

/// Sends `request` through client `c` and runs the world until it is
/// answered (or `within` passes); returns the answer and how long it took.
inline std::pair<std::optional<result<wire::message>>, sim_duration> call(world& w, int c, wire::body request,
                                                                          shared_bytes payload = {},
                                                                          sim_duration within = 10s) {
  auto answer = std::make_shared<std::optional<result<wire::message>>>();
  api_call a;
  a.request = std::move(request);
  a.payload = std::move(payload);
  a.timeout = std::chrono::duration_cast<std::chrono::microseconds>(within);
  a.done = [answer](result<wire::message> r) { *answer = std::move(r); };
  auto started = w.now();
  caf::anon_send(w.actor_of(w.client_index(c)), api_atom::value, std::move(a));
  auto give_up = started + within + 1s;
  while (!answer->has_value() && w.now() < give_up) w.run_until(w.now() + 10ms);
  return {*answer, w.now() - started};
}

/// How owner `from` reaches owner `to`, as the master's status says.
inline std::optional<wire::link_state> link_of(world& w, int from, int to) {
  auto [reply, took] = call(w, 0, wire::cluster_status{});
  if (!reply || !*reply) return std::nullopt;
  auto status = reply_body<wire::cluster_status_reply>(*reply);
  if (!status) return std::nullopt;
  std::optional<node_id> to_id;
  for (auto& m : status->members) {
    if (m.name == w.name_of(w.owner_index(to))) to_id = m.id;
  }
  for (auto& m : status->members) {
    if (m.name != w.name_of(w.owner_index(from))) continue;
    for (auto& l : m.links) {
      if (to_id && l.peer == *to_id) return l;
    }
  }
  return std::nullopt;
}

}  // namespace sluice::sim::test
