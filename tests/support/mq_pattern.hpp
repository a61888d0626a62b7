// The bytes of the messages that multi-process MQ tests and their child
// processes produce: "<n>:" and then bytes made from n, so a reader can
// check every byte of a message from its number alone.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::test {

inline std::string numbered_message(std::uint64_t n, std::size_t size) {
  auto out = std::to_string(n) + ":";
  std::uint64_t x = n * 0x9e3779b97f4a7c15ULL + 1;
  while (out.size() < size) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out.push_back(static_cast<char>(x >> 56));
  }
  out.resize(size);
  return out;
}

}  // namespace sluice::test
