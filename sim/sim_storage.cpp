#include "sim/sim_storage.hpp"

namespace sluice::sim {

void sim_disk::crash(rng& random) {
  auto kept = random.uniform(unsynced.size() + 1);
  for (std::size_t i = 0; i < kept; ++i) {
    auto& [key, value] = unsynced[i];
    if (value) {
      durable.insert_or_assign(key, *value);
    } else if (auto it = durable.find(key); it != durable.end()) {
      durable.erase(it);
    }
  }
  unsynced.clear();
}

result<std::optional<std::string>> sim_store::get(std::string_view key) {
  // The newest unsynced write wins; this process wrote it and sees it.
  for (auto it = disk_.unsynced.rbegin(); it != disk_.unsynced.rend(); ++it) {
    if (it->first == key) return it->second;
  }
  auto it = disk_.durable.find(key);
  if (it == disk_.durable.end()) return std::optional<std::string>{};
  return std::optional<std::string>{it->second};
}

result<void> sim_store::put(std::string_view key, std::string_view value) {
  if (SLUICE_BUGGIFY(faults_)) return fail(errc::unavailable, "simulated disk write error");
  disk_.unsynced.emplace_back(std::string{key}, std::string{value});
  return {};
}

result<void> sim_store::erase(std::string_view key) {
  if (SLUICE_BUGGIFY(faults_)) return fail(errc::unavailable, "simulated disk write error");
  disk_.unsynced.emplace_back(std::string{key}, std::nullopt);
  return {};
}

result<void> sim_store::sync() {
  if (SLUICE_BUGGIFY(faults_)) return fail(errc::unavailable, "simulated fsync error");
  for (auto& [key, value] : disk_.unsynced) {
    if (value) {
      disk_.durable.insert_or_assign(key, *value);
    } else if (auto it = disk_.durable.find(key); it != disk_.durable.end()) {
      disk_.durable.erase(it);
    }
  }
  disk_.unsynced.clear();
  return {};
}

result<void> sim_store::scan(std::string_view prefix,
                             const std::function<void(std::string_view, std::string_view)>& visit) {
  // What this process sees: the durable state with its unsynced writes on top.
  std::map<std::string, std::string, std::less<>> view = disk_.durable;
  for (auto& [key, value] : disk_.unsynced) {
    if (value) {
      view.insert_or_assign(key, *value);
    } else {
      view.erase(key);
    }
  }
  for (auto it = view.lower_bound(prefix); it != view.end() && it->first.starts_with(prefix); ++it) {
    visit(it->first, it->second);
  }
  return {};
}

}  // namespace sluice::sim
