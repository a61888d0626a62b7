#include "sim/checker.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "runtime/rng.hpp"
#include "sim/trace.hpp"

namespace sluice::sim {
namespace {

constexpr std::uint32_t value_magic = 0x4c564c53;  // "SLVL"
constexpr std::size_t header_bytes = 32;

struct value_header {
  std::uint32_t magic;
  std::uint32_t client;
  std::uint64_t seq;
  std::uint64_t key_hash;
  std::uint32_t body_bytes;
  std::uint32_t body_hash;
};
static_assert(sizeof(value_header) == header_bytes);

std::uint64_t key_hash(const std::string& key) { return hash_bytes(key.data(), key.size(), 17); }

/// Word i of a put's body: a Weyl sequence from a base drawn from the
/// put's id, each term folded once, so every word of every put differs
/// from its neighbours and from the words of other puts at the same
/// offset. A few instructions a word: a put of 100 KB cost more to fill
/// with a generator's draws than the cluster spent storing it.
std::uint64_t body_word(std::uint64_t base, std::uint64_t i) {
  auto x = base + (i + 1) * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 29);
}

void fill_body(std::byte* out, std::size_t n, put_id id) {
  auto base = mix_seed(mix_seed(id.client) ^ id.seq);
  std::size_t words = n / 8;
  for (std::size_t i = 0; i < words; ++i) {
    auto word = body_word(base, i);
    std::memcpy(out + 8 * i, &word, 8);
  }
  if (auto tail = n % 8; tail != 0) {
    auto word = body_word(base, words);
    std::memcpy(out + 8 * words, &word, tail);
  }
}

std::string show(const std::string& key) {
  return key.size() <= 40 ? key : key.substr(0, 40) + "...";
}

}  // namespace

shared_bytes make_value(const std::string& key, put_id id, std::size_t body_bytes) {
  auto buf = byte_buffer::allocate(header_bytes + body_bytes);
  fill_body(buf.data() + header_bytes, body_bytes, id);
  value_header h{value_magic, id.client, id.seq, key_hash(key), static_cast<std::uint32_t>(body_bytes),
                 static_cast<std::uint32_t>(hash_bytes(buf.data() + header_bytes, body_bytes))};
  std::memcpy(buf.data(), &h, sizeof h);
  return std::move(buf).freeze();
}

result<put_id> parse_value(const std::string& key, std::span<const std::byte> bytes) {
  if (bytes.size() < header_bytes) {
    return fail(errc::protocol, fmt::format("{} bytes, shorter than a value header", bytes.size()));
  }
  value_header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != value_magic) return fail(errc::protocol, "not a value the workload wrote");
  if (h.key_hash != key_hash(key)) return fail(errc::protocol, "a value written to another key");
  if (bytes.size() != header_bytes + h.body_bytes) {
    return fail(errc::protocol, fmt::format("torn value: {} bytes, the header says {}", bytes.size(),
                                            header_bytes + h.body_bytes));
  }
  auto body = bytes.subspan(header_bytes);
  if (static_cast<std::uint32_t>(hash_bytes(body.data(), body.size())) != h.body_hash) {
    return fail(errc::protocol, "torn value: its body does not match its checksum");
  }
  return put_id{h.client, h.seq};
}

void checker::put_started(const std::string& key, put_id id, sim_time at, sim_duration ttl, std::uint32_t copies) {
  auto& h = keys_[key];
  h.puts[id] = put_record{at, at, outcome::pending, 0, std::nullopt, ttl, copies};
  if (ttl > sim_duration::zero() && (!h.earliest_expiry || at + ttl < *h.earliest_expiry)) h.earliest_expiry = at + ttl;
}

void checker::put_ended(const std::string& key, put_id id, sim_time at, const result<std::uint64_t>& r) {
  auto& h = keys_[key];
  auto& p = h.puts.at(id);
  p.end = at;
  if (!r) {
    p.state = outcome::failed;
    stats_.puts_failed += 1;
    return;
  }
  p.state = outcome::acked;
  p.version = *r;
  stats_.puts_acked += 1;
  if (p.observed && *p.observed != p.version) {
    violation(fmt::format("put {}/{} of '{}' acknowledged as version {} but read as version {}",
                          id.client, id.seq, show(key), p.version, *p.observed));
  }
  // Two acknowledged puts of one key never share a version (within one
  // life of the master, which numbers versions).
  auto [same, same_end] = h.acked_by_version.equal_range(p.version);
  for (auto it = same; it != same_end; ++it) {
    auto& other_id = it->second;
    auto& other = h.puts.at(other_id);
    if (other_id == id) continue;
    if (crash_between(master_crashes_, std::min(other.start, p.start), at)) continue;
    violation(fmt::format("puts {}/{} and {}/{} of '{}' were both acknowledged as version {}", id.client,
                          id.seq, other_id.client, other_id.seq, show(key), p.version));
  }
  h.acked_by_version.emplace(p.version, id);
  auto where = std::upper_bound(h.acked_by_end.begin(), h.acked_by_end.end(), at,
                                [](sim_time t, const auto& e) { return t < e.first; });
  h.acked_by_end.insert(where, {at, id});
}

std::size_t checker::remove_started(const std::string& key, sim_time at) {
  auto& h = keys_[key];
  auto& removes = h.removes;
  if (!removes.empty() && at < removes.back().start) h.removes_in_order = false;
  removes.push_back(remove_record{at, at, outcome::pending});
  return removes.size() - 1;
}

void checker::remove_ended(const std::string& key, std::size_t index, sim_time at, const result<bool>& r) {
  auto& rec = keys_[key].removes.at(index);
  rec.end = at;
  rec.state = r ? outcome::acked : outcome::failed;
  stats_.removes += 1;
}

bool checker::crash_between(const std::vector<sim_time>& crashes, sim_time from, sim_time to) const {
  for (auto t : crashes) {
    if (t >= from && t <= to) return true;
  }
  return false;
}

bool checker::crashes_close(sim_time from, sim_time to) const {
  std::optional<sim_time> last;
  for (auto t : owner_crashes_) {  // in time order
    if (t < from || t > to) continue;
    if (last && t - *last < recovery_window_) return true;
    last = t;
  }
  return false;
}

bool checker::may_be_lost(const std::string& key, const history& h, const put_record& p, sim_time end) const {
  if (crash_between(master_crashes_, p.start, end)) return true;
  if (!crash_between(owner_crashes_, p.start, end)) return false;
  if (p.copies < 2 || p.ttl > sim_duration::zero()) return true;
  // A copy evicted to make room is not made again: one left.
  if (auto e = copies_evicted_.find(key); e != copies_evicted_.end() && crash_between(e->second, p.start, end)) {
    return true;
  }
  // A put that may have replaced this one after it began, and did not
  // surely keep two copies, may have been the key's value when a crash
  // took it (a failed put may have committed one copy).
  for (auto& [id, q] : h.puts) {
    if (&q == &p) continue;
    bool may_follow = q.state == outcome::pending || q.end > p.start;
    if (may_follow && (q.state != outcome::acked || q.copies < 2)) return true;
  }
  return crashes_close(p.start, end);
}

std::vector<std::string> checker::durable_keys(sim_time now) const {
  std::vector<std::string> out;
  for (auto& [key, h] : keys_) {
    for (auto& [id, p] : h.puts) {
      if (p.state != outcome::acked || p.copies < 2 || p.ttl > sim_duration::zero()) continue;
      bool removed = false;
      for (auto& rm : h.removes) removed |= rm.start <= now && (rm.state != outcome::acked || rm.end > p.start);
      if (removed || may_be_lost(key, h, p, now)) continue;
      if (auto f = forgotten_.find(key); f != forgotten_.end() && crash_between(f->second, p.start, now)) continue;
      out.push_back(key);
      break;
    }
  }
  return out;
}

void checker::get_ended(const std::string& key, sim_time start, sim_time end,
                        const result<std::pair<std::uint64_t, shared_bytes>>& r) {
  auto& h = keys_[key];
  if (r) {
    stats_.gets_found += 1;
    check_found(key, h, start, end, r->first, r->second);
  } else if (r.code() == errc::not_found) {
    stats_.gets_not_found += 1;
    check_absent(key, h, start, end, "get answered not_found");
  } else {
    stats_.gets_failed += 1;
  }
}

void checker::exists_ended(const std::string& key, sim_time start, sim_time end, const result<bool>& r) {
  stats_.exists += 1;
  if (!r) return;
  auto& h = keys_[key];
  if (!*r) {
    check_absent(key, h, start, end, "exists answered false");
    return;
  }
  for (auto& [id, p] : h.puts) {
    if (p.start < end) return;
  }
  violation(fmt::format("exists answered true for '{}', which no put had written", show(key)));
}

void checker::check_found(const std::string& key, history& h, sim_time start, sim_time end,
                          std::uint64_t version, const shared_bytes& bytes) {
  auto id = parse_value(key, bytes.span());
  if (!id) {
    violation(fmt::format("get of '{}' at {} returned bad bytes: {}", show(key), format_time(end),
                          id.error().message()));
    return;
  }
  auto it = h.puts.find(*id);
  if (it == h.puts.end() || it->second.start > end) {
    violation(fmt::format("get of '{}' returned put {}/{}, which never wrote that key", show(key),
                          id->client, id->seq));
    return;
  }
  auto& p = it->second;
  auto where = fmt::format("get of '{}' ending at {} returned put {}/{} as version {}", show(key),
                           format_time(end), id->client, id->seq, version);
  if (p.state == outcome::acked && p.version != version) {
    violation(fmt::format("{}, but that put was acknowledged as version {}", where, p.version));
  }
  if (p.observed && *p.observed != version && !crash_between(master_crashes_, p.start, end)) {
    violation(fmt::format("{}, but an earlier read saw it as version {}", where, *p.observed));
  }
  p.observed = version;
  if (p.state == outcome::acked && p.ttl > sim_duration::zero() && start > p.end + p.ttl) {
    violation(fmt::format("{}, but its time to live ran out by {}", where, format_time(p.end + p.ttl)));
  }
  if (p.state == outcome::acked) {
    // Removes that began after the put ended and ended before the read
    // began: those began in between.
    auto rm = h.removes.begin();
    if (h.removes_in_order) {
      rm = std::upper_bound(h.removes.begin(), h.removes.end(), p.end,
                            [](sim_time t, const remove_record& r) { return t < r.start; });
    }
    for (; rm != h.removes.end() && (!h.removes_in_order || rm->start < start); ++rm) {
      if (rm->state == outcome::acked && rm->end < start && p.end < rm->start) {
        violation(fmt::format("{}, which a remove acknowledged at {} had deleted", where, format_time(rm->end)));
      }
    }
  }
  // Newer versions, newest first: one acknowledged before the read began
  // makes it stale.
  for (auto it = h.acked_by_version.rbegin(); it != h.acked_by_version.rend() && it->first > version; ++it) {
    auto& other_id = it->second;
    auto& other = h.puts.at(other_id);
    if (other.end >= start) continue;
    if (crash_between(master_crashes_, other.start, end)) continue;
    violation(fmt::format("{}: a stale read, version {} (put {}/{}) was acknowledged at {}", where,
                          other.version, other_id.client, other_id.seq, format_time(other.end)));
    break;
  }
}

void checker::check_absent(const std::string& key, const history& h, sim_time start, sim_time end,
                           const char* what) {
  // Any put with a time to live that began early enough may have become
  // the key's version and expired since, taking the key with it.
  if (h.earliest_expiry && *h.earliest_expiry <= end) return;
  // A remove explains the absence only if it may have taken effect after
  // the put: it began before the read ended and did not end before the put
  // began (one that failed, or has not ended, may still take effect
  // later). So one not acknowledged explains every put, and acknowledged
  // ones explain the puts that began before the last of them ended.
  std::optional<sim_time> removed_until;
  for (auto& rm : h.removes) {
    if (rm.start >= end) {
      if (h.removes_in_order) break;
      continue;
    }
    if (rm.state != outcome::acked) return;
    if (!removed_until || rm.end > *removed_until) removed_until = rm.end;
  }
  // The puts acknowledged before the read began (and ended, so began,
  // after the last remove that explains them).
  auto first = h.acked_by_end.begin();
  if (removed_until) {
    first = std::lower_bound(h.acked_by_end.begin(), h.acked_by_end.end(), *removed_until,
                             [](const auto& e, sim_time t) { return e.first < t; });
  }
  for (auto it = first; it != h.acked_by_end.end() && it->first < start; ++it) {
    auto& id = it->second;
    auto& p = h.puts.at(id);
    SLUICE_ASSERT(p.state == outcome::acked && p.end == it->first);
    bool removed = removed_until && p.start < *removed_until;
    if (removed || may_be_lost(key, h, p, end)) continue;
    if (auto f = forgotten_.find(key); f != forgotten_.end() && crash_between(f->second, p.start, end)) continue;
    violation(fmt::format("{} for '{}' at {}, but put {}/{} was acknowledged at {} with {} and nothing "
                          "could have removed it",
                          what, show(key), format_time(end), id.client, id.seq, format_time(p.end),
                          p.copies == 1 ? std::string{"one copy"} : fmt::format("{} copies", p.copies)));
    return;
  }
}

}  // namespace sluice::sim
