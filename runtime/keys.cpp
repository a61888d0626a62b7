#include "runtime/keys.hpp"

#include <xxhash.h>

namespace sluice {

static_assert((key_slots & (key_slots - 1)) == 0, "key_slots is a power of two");

key_slot slot_of(std::string_view key) noexcept {
  return static_cast<key_slot>(XXH3_64bits(key.data(), key.size()) & (key_slots - 1));
}

}  // namespace sluice
