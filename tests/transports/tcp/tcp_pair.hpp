// Two tcp transports linked to each other, for tests of the tcp transport.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "tests/transports/test_sink.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace sluice::transport::testing {

inline constexpr std::uint16_t tag_a = 1;
inline constexpr std::uint16_t tag_b = 2;

// Two transports, b listening, a connected to it; both links up.
struct linked_pair {
  recording_sink sink_a;
  recording_sink sink_b;
  tcp_transport a;
  tcp_transport b;
  std::string address;
  link_id a_link = 0;
  link_id b_link = 0;

  explicit linked_pair(transport_limits limits = {})
      : a(tag_a, sink_a, limits), b(tag_b, sink_b, limits) {
    address = b.listen("127.0.0.1:0").value();
    a_link = a.connect(address).value();
    REQUIRE(sink_a.wait_link_up(a_link));
    b_link = sink_b.wait_up().value();
  }
};


}  // namespace sluice::transport::testing
