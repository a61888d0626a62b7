// What both ends of a stream of RPC results agree on (docs/rpc.md,
// "Streams"; docs/wire-format.md, 6.2): the fields its calls carry, the
// bound on its window, and the clock its deadline is on. The state
// machines are stream_server (the serving end, in serve_table.hpp) and
// stream_caller.hpp (the calling end); the client library (api/src/rpc_endpoint.cpp and
// rpc_serve_calls.cpp) and the simulator (sim/rpc_streams.cpp) both drive
// them.
//
// A stream is a convention over ordinary calls to its name:
//  - the opening call carries the caller's arguments plus `window`, and is
//    answered at once with the stream's `id` (and the serving client);
//  - the caller's "watch" stays open for the stream's life: its cancel
//    stops the stream at the serving end;
//  - each "pull" k is the caller's credit for item k, answered with that
//    item, the end (a reply without any payload) or the stream's error;
//    the caller sends pull k + window when it consumes item k;
//  - "cancel" gives the stream up.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace sluice {

/// The clock a stream's deadline is on: CAF's actor clock is this one
/// (so is the simulator's virtual time), and so are the library's threads.
using stream_clock = std::chrono::steady_clock;
using stream_time = stream_clock::time_point;

/// Largest credit window: a bound on the items a stream holds at each
/// end, and on the pulls in flight for it (each is a call in flight).
inline constexpr std::uint32_t rpc_stream_window_max = 1024;

/// How a stream travels: calls to the stream's name whose arguments carry
/// these fields. On the wire: never rename one.
namespace stream_field {
/// The opening call: the credit window, added to the caller's arguments.
inline constexpr std::string_view window = "sluice.window";
/// The opening call's answer, and every control call: the stream's id.
inline constexpr std::string_view id = "sluice.stream";
/// The opening call's answer: the serving client's id.
inline constexpr std::string_view server = "sluice.server";
/// A control call: "watch", "pull" or "cancel".
inline constexpr std::string_view op = "sluice.op";
/// A pull: the item it asks for (0, 1, ...).
inline constexpr std::string_view seq = "sluice.seq";
}  // namespace stream_field

/// What an answer to one of a stream's calls (a pull, the watch, a
/// cancel) says.
enum class stream_answer_kind {
  item,   ///< a pull's item
  end,    ///< the end: a reply without any payload
  error,  ///< the stream's error (or a refusal of a bad call)
  done,   ///< a cancel's answer: an empty dict, as a call's result
};

}  // namespace sluice
