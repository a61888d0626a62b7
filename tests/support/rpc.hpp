// Helpers for RPC tests: clients on the owner's host, dicts of one string.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "sluice/node.hpp"
#include "sluice/rpc.hpp"

namespace sluice::test {

/// A client of the owner at `address` over `transport`.
inline std::unique_ptr<client> client_over(const std::string& address, client_transport transport,
                                           const std::string& name) {
  client_options options;
  options.transport = transport;
  options.name = name;
  auto c = client::connect(address, options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

/// A client of the owner at `address` through shared memory (so that it
/// can serve as well as call).
inline std::unique_ptr<client> shm_client(const std::string& address, const std::string& name = "client") {
  return client_over(address, client_transport::shared_memory, name);
}

/// A client of `cluster`'s owner through shared memory.
inline std::unique_ptr<client> shm_client(const local_cluster& cluster, const std::string& name = "client") {
  return shm_client(cluster.client_address(), name);
}

/// A client of the owner at `address` over TCP, as a client on another
/// host is.
inline std::unique_ptr<client> tcp_client(const std::string& address, const std::string& name = "client") {
  return client_over(address, client_transport::tcp, name);
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

/// A master and an owner in this process.
inline std::unique_ptr<local_cluster> start_cluster() {
  auto c = local_cluster::start();
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

/// A handler that answers {"text": its arguments' "text"}.
inline result<dict_builder> echo(const rpc_request& r) {
  auto* f = r.args().find("text");
  if (f == nullptr) return fail(errc::invalid_argument, "no 'text' argument");
  auto text = f->as_string();
  if (!text) return text.error();
  dict_builder out;
  if (auto ok = out.add_string("text", *text); !ok) return ok.error();
  return out;
}

/// A handler that answers {"id": `id`} (the serving client's id).
inline rpc_handler who(std::string id) {
  return [id](const rpc_request&) -> result<dict_builder> {
    dict_builder out;
    REQUIRE(out.add_string("id", id).ok());
    return out;
  };
}

/// Waits until `pred` holds, or fails the test after 5 s.
template <class Pred>
void eventually(Pred pred) {
  using namespace std::chrono_literals;
  auto give_up = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "the condition never held");
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace sluice::test
