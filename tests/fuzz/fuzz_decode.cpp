// libFuzzer target: whole frames from an untrusted peer into the decoder.
//
// The property: decode_bytes returns a message or an errc::protocol error
// for every input, and never crashes, hangs, leaks or reads out of bounds
// (AddressSanitizer watches the last three). A message that decodes must
// also encode and decode again, so the encoder is exercised on whatever
// values a hostile peer managed to get through.
//
//   build-fuzz/tests/fuzz/sluice_fuzz_decode -max_total_time=60 corpus/
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/wire/codec.hpp"

namespace {

[[noreturn]] void broken_property() {
  // A crash is how libFuzzer records a finding and saves the input.
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  std::span<const std::byte> input{reinterpret_cast<const std::byte*>(data), size};
  auto decoded = wire::decode_bytes(input, wire::frame_limits{});
  if (!decoded.ok()) {
    if (decoded.code() != errc::protocol) broken_property();
    return 0;
  }
  auto again_bytes = wire::flatten(wire::encode(decoded->env, decoded->payload));
  // The re-encoded envelope may be larger than the input's (lists of empty
  // structs grow to full structs), so the second decode is not size-bound.
  wire::frame_limits roomy{~std::uint64_t{0}, ~std::uint64_t{0}};
  auto again = wire::decode_bytes({again_bytes.data(), again_bytes.size()}, roomy);
  if (!again.ok()) broken_property();
  if (again->env.body.index() != decoded->env.body.index()) broken_property();
  if (again->payload.size() != decoded->payload.size()) broken_property();
  return 0;
}
