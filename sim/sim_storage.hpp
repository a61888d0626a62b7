// Simulated storage: a node's disk that survives its crashes, with the
// crash semantics real disks have — writes not yet synced may be lost (a
// crash keeps a random prefix of them, in write order). Wiping the disk
// models a node rebuilt on a fresh machine.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/buggify.hpp"
#include "runtime/rng.hpp"
#include "runtime/storage/durable_store.hpp"

namespace sluice::sim {

/// The disk itself; owned by the world, outlives the node's incarnations.
struct sim_disk {
  std::map<std::string, std::string, std::less<>> durable;
  std::vector<std::pair<std::string, std::optional<std::string>>> unsynced;  // in write order
  /// Times a node threw its unsynced writes away to carry on from what is
  /// durable (the master does, when a write failed): state it had is gone.
  std::uint64_t discards = 0;

  /// What a crash leaves: a random prefix of the unsynced writes lands.
  void crash(rng& random);
  void wipe() {
    durable.clear();
    unsynced.clear();
  }
};

/// One incarnation's view of its disk.
class sim_store final : public durable_store {
 public:
  /// REQUIRES: `disk` and `faults` (when not null) outlive the store.
  sim_store(sim_disk& disk, fault_sites* faults) : disk_(disk), faults_(faults) {}

  result<std::optional<std::string>> get(std::string_view key) override;
  result<void> put(std::string_view key, std::string_view value) override;
  result<void> erase(std::string_view key) override;
  result<void> sync() override;
  void discard() override {
    disk_.unsynced.clear();
    disk_.discards += 1;
  }
  result<void> scan(std::string_view prefix,
                    const std::function<void(std::string_view, std::string_view)>& visit) override;

 private:
  sim_disk& disk_;
  fault_sites* faults_;
};

}  // namespace sluice::sim
