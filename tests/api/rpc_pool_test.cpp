// Large RPC arguments and results on the owner's host: written once into
// the owner's pool and read there in place.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/rpc.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::test;

TEST_CASE("rpc: a 64 MiB tensor argument is read by the handler in place, where the caller wrote it in the pool") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  constexpr std::size_t count = 16u << 20;  // float32: 64 MiB
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 1000);
  std::optional<sluice::pool_location> seen_at;
  bool in_place = false;
  REQUIRE(server->rpc()
              .serve("sum",
                     [&](const rpc_request& r) -> sluice::result<dict_builder> {
                       seen_at = r.args_location();
                       auto t = r.args().find("x")->as_tensor();
                       if (!t) return t.error();
                       // The tensor's bytes lie inside the arguments' region: a view, not a copy.
                       auto region = r.args().region();
                       in_place = t->data.data() >= region.data() && t->data.data() + t->data.size() <= region.data() + region.size();
                       double sum = 0;
                       auto* f = reinterpret_cast<const float*>(t->data.data());
                       for (std::size_t i = 0; i < t->element_count(); i += 4096) sum += f[i];
                       dict_builder out;
                       REQUIRE(out.add_float64("sum", sum).ok());
                       return out;
                     })
              .ok());
  dict_builder args;
  REQUIRE(args.add_tensor("x", {sluice::dtype_float32, {static_cast<std::int64_t>(count)}},
                          std::as_bytes(std::span{data}))
              .ok());
  double expected = 0;
  for (std::size_t i = 0; i < count; i += 4096) expected += data[i];

  // Written in place: the caller encodes into pool memory; the handler reads those very bytes.
  auto room = caller->rpc().args_buffer(args.encoded_size());
  REQUIRE(room.ok());
  REQUIRE(room->location().has_value());
  auto where = *room->location();
  REQUIRE(args.encode_into(room->bytes()).ok());
  auto r = caller->rpc().call(rpc_target::any(), "sum", std::move(*room), {.timeout = 20s});
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(r->dict().find("sum")->as_float64().value() == expected);
  REQUIRE(seen_at.has_value());
  CHECK(*seen_at == where);
  CHECK(in_place);

  // From a builder: encoded once, into the pool, and read there.
  seen_at.reset();
  auto again = caller->rpc().call(rpc_target::any(), "sum", args, {.timeout = 20s});
  REQUIRE(again.ok());
  CHECK(seen_at.has_value());
}

TEST_CASE("rpc: a large result is read by the caller in place in the pool") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  std::string big(1 << 20, 'r');
  REQUIRE(server->rpc()
              .serve("big",
                     [&big](const rpc_request&) -> sluice::result<dict_builder> {
                       dict_builder out;
                       REQUIRE(out.add_bytes("data", std::as_bytes(std::span{big})).ok());
                       return out;
                     })
              .ok());
  auto r = caller->rpc().call(rpc_target::any(), "big", dict_builder{});
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(r->location().has_value());
  auto bytes = r->dict().find("data")->as_bytes().value();
  CHECK(std::string_view{reinterpret_cast<const char*>(bytes.data()), bytes.size()} == big);
  // Asynchronously too, on the async channel.
  auto f = caller->rpc().call_async(rpc_target::any(), "big", dict_builder{});
  auto ra = f.get();
  REQUIRE(ra.ok());
  CHECK(ra->location().has_value());
}
