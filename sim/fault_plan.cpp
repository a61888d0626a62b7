#include "sim/fault_plan.hpp"

#include <fmt/format.h>

namespace sluice::sim {
namespace {

fault_plan light_plan() {
  fault_plan p;
  p.latency_max = 2ms;
  p.jitter_max = 500us;
  p.link_reset_every = 20s;
  p.clog_every = 10s;
  p.owner_crash_every = 60s;
  p.client_crash_every = 60s;
  return p;
}

fault_plan heavy_plan() {
  fault_plan p;
  p.latency_max = 5ms;
  p.jitter_max = 2ms;
  p.drop_pm = 2;
  p.duplicate_pm = 2;
  p.reorder_pm = 2;
  p.link_reset_every = 4s;
  p.clog_every = 3s;
  p.partition_every = 8s;
  p.owner_crash_every = 10s;
  p.client_crash_every = 15s;
  p.master_crash_every = 40s;
  p.pair_cut_every = 10s;
  p.pair_slow_every = 10s;
  p.pair_loss_every = 10s;
  p.buggify = true;
  return p;
}

sim_duration maybe(rng& random, std::uint32_t pm_on, sim_duration mean_min, sim_duration mean_max) {
  if (!random.chance(pm_on, 1000)) return sim_duration{0};
  auto span = static_cast<std::uint64_t>((mean_max - mean_min).count());
  return mean_min + sim_duration{static_cast<sim_duration::rep>(random.uniform(span + 1))};
}

fault_plan cuts_plan(rng& random) {
  fault_plan p;
  p.pair_cut_every = maybe(random, 1000, 500ms, 3s);
  p.cuts_only = true;
  return p;
}

fault_plan swarm_plan(rng& random) {
  if (random.chance(1, 6)) return cuts_plan(random);
  fault_plan p;
  p.latency_min = sim_duration{static_cast<sim_duration::rep>(random.uniform(200'000) + 10'000)};
  p.latency_max = p.latency_min + sim_duration{static_cast<sim_duration::rep>(random.uniform(10'000'000))};
  p.jitter_max = sim_duration{static_cast<sim_duration::rep>(random.uniform(3'000'000))};
  p.drop_pm = random.chance(1, 4) ? static_cast<std::uint32_t>(random.uniform(10)) : 0;
  p.duplicate_pm = random.chance(1, 4) ? static_cast<std::uint32_t>(random.uniform(10)) : 0;
  p.reorder_pm = random.chance(1, 4) ? static_cast<std::uint32_t>(random.uniform(10)) : 0;
  p.link_reset_every = maybe(random, 600, 1s, 20s);
  p.clog_every = maybe(random, 600, 1s, 10s);
  p.partition_every = maybe(random, 500, 2s, 20s);
  p.owner_crash_every = maybe(random, 500, 3s, 30s);
  p.client_crash_every = maybe(random, 400, 3s, 30s);
  p.master_crash_every = maybe(random, 200, 10s, 60s);
  p.wipe_on_restart_pm = static_cast<std::uint32_t>(random.uniform(1001));
  p.buggify = random.chance(1, 2);
  p.pair_cut_every = maybe(random, 500, 1s, 15s);
  p.pair_slow_every = maybe(random, 400, 1s, 15s);
  p.pair_loss_every = maybe(random, 400, 1s, 15s);
  return p;
}

}  // namespace

result<fault_level> parse_fault_level(std::string_view text) {
  if (text == "none") return fault_level::none;
  if (text == "light") return fault_level::light;
  if (text == "heavy") return fault_level::heavy;
  if (text == "swarm") return fault_level::swarm;
  if (text == "cuts") return fault_level::cuts;
  return fail(errc::invalid_argument,
              "unknown fault level '" + std::string{text} + "'; use none, light, heavy, swarm or cuts");
}

std::string_view to_string(fault_level level) noexcept {
  switch (level) {
    case fault_level::none: return "none";
    case fault_level::light: return "light";
    case fault_level::heavy: return "heavy";
    case fault_level::swarm: return "swarm";
    case fault_level::cuts: return "cuts";
  }
  return "none";
}

fault_plan fault_plan::make(fault_level level, rng& random) {
  switch (level) {
    case fault_level::none: return fault_plan{};
    case fault_level::light: return light_plan();
    case fault_level::heavy: return heavy_plan();
    case fault_level::swarm: return swarm_plan(random);
    case fault_level::cuts: return cuts_plan(random);
  }
  return fault_plan{};
}

std::string fault_plan::describe() const {
  auto every = [](const char* name, sim_duration d) {
    return d.count() == 0 ? std::string{} : fmt::format(" {}/{:.1f}s", name, seconds(d));
  };
  return fmt::format("{}latency {:.2f}-{:.2f}ms jitter {:.2f}ms drop {}‰ dup {}‰ reorder {}‰{}{}{}{}{}{}{}{}{}{}",
                     cuts_only ? "cuts only: " : "",
                     seconds(latency_min) * 1e3, seconds(latency_max) * 1e3,
                     seconds(jitter_max) * 1e3, drop_pm, duplicate_pm, reorder_pm,
                     every("reset", link_reset_every), every("clog", clog_every),
                     every("partition", partition_every), every("owner-crash", owner_crash_every),
                     every("client-crash", client_crash_every),
                     every("master-crash", master_crash_every), every("pair-cut", pair_cut_every),
                     every("pair-slow", pair_slow_every), every("pair-loss", pair_loss_every),
                     buggify ? " buggify" : "");
}

}  // namespace sluice::sim
