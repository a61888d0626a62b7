// Helpers for RPC tests: clients on the owner's host, dicts of one string.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <string_view>

#include "sluice/rpc.hpp"

namespace sluice::test {

/// A client of the owner at `address` through shared memory (so that it
/// can serve as well as call).
inline std::unique_ptr<client> shm_client(const std::string& address, const std::string& name = "client") {
  client_options options;
  options.transport = client_transport::shared_memory;
  options.name = name;
  auto c = client::connect(address, options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

/// A dict {"text": text}.
inline dict_builder text_args(std::string_view text) {
  dict_builder d;
  REQUIRE(d.add_string("text", text).ok());
  return d;
}

/// The string field `name` of `d`, which must exist.
inline std::string string_field(const dict_view& d, std::string_view name = "text") {
  auto* f = d.find(name);
  REQUIRE(f != nullptr);
  return std::string{f->as_string().value()};
}

}  // namespace sluice::test
