// View and Reservation: Python objects over bytes in the pool (or, for a
// client over TCP, in the client's memory). Both expose the buffer
// protocol and DLPack (__dlpack__, __dlpack_device__) over the same
// bytes, with no copy; what they hold — a get's value and its read lease,
// a reservation's room — lives while the object or any array made from it
// does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "python/src/common.hpp"

namespace sluice::python {

/// Bytes a View or a Reservation shows, and what keeps them valid.
struct region_state {
  std::shared_ptr<client_holder> client;
  /// Keeps `data` valid: a sluice::value, or a reservation's room.
  std::shared_ptr<const void> keep;
  std::byte* data = nullptr;
  std::size_t size = 0;
  bool writable = false;
  /// nullopt: plain bytes (uint8, one dimension of `size`).
  std::optional<dtype> type;
  std::vector<std::int64_t> shape;
  /// In elements, compact row-major.
  std::vector<std::int64_t> strides;
  std::uint64_t version = 0;

  /// Checks that the bytes may still be used; raises ClientClosed after
  /// the client closed. REQUIRES: the GIL.
  void check(std::string_view what) const;
};

/// Fills in shape and strides: `shape` as given for a tensor, {size} for
/// bytes.
void set_layout(region_state& s, std::optional<dtype> type, std::vector<std::int64_t> shape);

/// A read-only view of a value's bytes, or of one field of a dict value.
struct view {
  std::shared_ptr<region_state> s;
};

/// Room for a value written in place, committed once.
struct reservation {
  std::shared_ptr<region_state> s;
  /// The room; empty once committed or aborted.
  std::shared_ptr<sluice::writable_value> room;
};

/// __dlpack__ of a region: a "dltensor" capsule whose DLManagedTensor
/// holds the region until the consumer's deleter runs.
py::capsule dlpack_capsule(const std::shared_ptr<region_state>& s);

void bind_views(py::module_& m);

}  // namespace sluice::python
