// link_manager: which way a node reaches each of its peers. For every peer
// it keeps the health of each path — a kind of transport, in the order the
// node's configuration prefers (e.g. rdma > tcp > relay) — picks the best
// healthy one, demotes a path on errors and lets the caller try it again
// later, backing off while it keeps failing.
//
// Pure bookkeeping: no I/O and no clock of its own. The caller passes the
// time (an owner passes its actor clock), opens the links, sends, and
// reports each outcome back, so the simulator runs it as is.
//
// Thread safety: none; one actor uses it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::transport {

/// The ways to reach a peer. The values index arrays: do not change them.
enum class path_kind : std::uint8_t {
  shm = 0,    ///< shared memory, on one host
  rdma = 1,   ///< one-sided reads and writes over RDMA
  tcp = 2,    ///< a direct TCP link
  relay = 3,  ///< through a third node that reaches both ends
};
inline constexpr std::size_t path_kind_count = 4;

std::string_view to_string(path_kind kind) noexcept;
/// "shm", "rdma", "tcp", "relay"; nothing for anything else.
std::optional<path_kind> parse_path_kind(std::string_view name) noexcept;

enum class path_health : std::uint8_t {
  untried,  ///< never used: counts as healthy
  up,       ///< the last use succeeded
  down,     ///< the last use failed; retried after its backoff
};
std::string_view to_string(path_health health) noexcept;

struct link_policy {
  /// The paths to use, best first; kinds not listed are never used.
  std::vector<path_kind> order{path_kind::rdma, path_kind::tcp, path_kind::relay};
  /// The first retry of a failed path comes this long after the failure;
  /// each further failure doubles the wait, up to retry_max.
  std::chrono::microseconds retry_initial{1'000'000};
  std::chrono::microseconds retry_max{30'000'000};
  /// Peers remembered at once; beyond it the one used least recently is
  /// forgotten. Bounds memory when peers come and go.
  std::size_t peers_max = 4096;
};

struct path_report {
  path_kind kind = path_kind::tcp;
  path_health health = path_health::untried;
  std::uint32_t failures = 0;  ///< failures in a row
  std::chrono::microseconds retry_in{0};  ///< down: until the next retry is due
  std::string last_error;
  std::uint64_t bytes = 0;  ///< payload bytes the path carried (carried())
};

struct peer_report {
  std::uint64_t peer = 0;
  std::string name;
  /// The path choose() gives now; nothing when no path is usable.
  std::optional<path_kind> active;
  std::uint64_t via = 0;  ///< the node relaying to the peer, when it went through one
  std::vector<path_report> paths;  ///< the usable kinds, in the policy's order
};

class link_manager {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit link_manager(link_policy policy = {});

  /// Whether this node can use `kind` at all (rdma: a device was found).
  /// Kinds start available; an unavailable kind is never chosen.
  void set_available(path_kind kind, bool available);
  bool available(path_kind kind) const noexcept;

  /// The paths to try for one request to `peer`, best first: the usable
  /// kinds that are not down, in the policy's order, then those that are
  /// down (a last resort beats no way at all). Empty when none is usable.
  std::vector<path_kind> plan(std::uint64_t peer, time_point now);
  /// The first path of plan().
  std::optional<path_kind> choose(std::uint64_t peer, time_point now);

  /// Marks the path up. Returns true when it was down (it is back).
  bool succeeded(std::uint64_t peer, path_kind kind, time_point now);
  /// Marks the path down for `why`. Returns true when it was not down
  /// already (a demotion worth a log line).
  bool failed(std::uint64_t peer, path_kind kind, time_point now, std::string why);

  /// Counts `bytes` of payload the path to `peer` carried (for reports).
  void carried(std::uint64_t peer, path_kind kind, std::uint64_t bytes, time_point now);

  /// The down paths whose retry is due, each handed out once per backoff
  /// (a retry that never reports back comes round again): the caller
  /// tries each and reports succeeded() or failed().
  std::vector<std::pair<std::uint64_t, path_kind>> due_retries(time_point now);

  /// What the last use of the path to `peer` said (untried for peers not
  /// known).
  path_health health(std::uint64_t peer, path_kind kind) const;

  void set_name(std::uint64_t peer, std::string name);
  void set_via(std::uint64_t peer, std::uint64_t via);
  void forget(std::uint64_t peer) { peers_.erase(peer); }

  /// Every peer, by id.
  std::vector<peer_report> report(time_point now) const;
  std::size_t peer_count() const noexcept { return peers_.size(); }

 private:
  struct path_state {
    path_health health = path_health::untried;
    std::uint32_t failures = 0;
    time_point retry_at{};
    std::string last_error;
    std::uint64_t bytes = 0;
  };
  struct peer_state {
    std::string name;
    std::uint64_t via = 0;
    time_point last_used{};
    std::array<path_state, path_kind_count> paths{};
  };

  peer_state& touch(std::uint64_t peer, time_point now);
  std::chrono::microseconds backoff(std::uint32_t failures) const;
  bool usable(path_kind kind) const noexcept;

  link_policy policy_;
  std::array<bool, path_kind_count> available_{true, true, true, true};
  std::map<std::uint64_t, peer_state> peers_;  // ordered: reports and retries come out by id
};

}  // namespace sluice::transport
