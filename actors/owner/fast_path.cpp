#include "actors/owner/fast_path.hpp"

#include "runtime/wire/codec.hpp"

namespace sluice {

void fast_index::publish(const std::string& key, std::uint64_t version, shared_bytes bytes,
                         std::chrono::steady_clock::time_point expires) {
  std::lock_guard guard{mutex_};
  auto [it, inserted] = entries_.try_emplace(key, entry{version, bytes, expires, false});
  if (!inserted && it->second.version < version) it->second = entry{version, std::move(bytes), expires, false};
}

void fast_index::erase(const std::string& key) {
  std::lock_guard guard{mutex_};
  entries_.erase(key);
}

void fast_index::erase_version(const std::string& key, std::uint64_t version) {
  std::lock_guard guard{mutex_};
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.version == version) entries_.erase(it);
}

void fast_index::clear() {
  std::lock_guard guard{mutex_};
  entries_.clear();
}

std::optional<fast_index::entry> fast_index::find(std::string_view key) const {
  std::lock_guard guard{mutex_};
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  it->second.touched = true;
  return it->second;
}

bool fast_index::take_touched(const std::string& key) {
  std::lock_guard guard{mutex_};
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  return std::exchange(it->second.touched, false);
}

bool fast_index::holds(const std::string& key, std::uint64_t version) const {
  std::lock_guard guard{mutex_};
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.version == version;
}

std::size_t fast_index::size() const {
  std::lock_guard guard{mutex_};
  return entries_.size();
}

std::optional<wire::outbound_frame> serve_fast(const fast_index& index, node_id self,
                                               const wire::inbound_frame& frame,
                                               std::chrono::steady_clock::time_point now) {
  if (!index.enabled(now)) return std::nullopt;
  auto msg = wire::decode(wire::inbound_frame{frame.envelope, frame.payload});
  if (!msg || msg->env.request_id == 0) return std::nullopt;
  // A frame for another node is a relay's to pass on, never to answer.
  if (msg->env.target.value != 0 && msg->env.target != self) return std::nullopt;
  auto* get = std::get_if<wire::kv_get>(&msg->env.body);
  if (get == nullptr) return std::nullopt;
  auto found = index.find(get->key);
  if (!found || now >= found->expires) return std::nullopt;
  wire::envelope reply;
  reply.reply_to = msg->env.request_id;
  reply.source = self;
  reply.target = msg->env.source;
  reply.body = wire::kv_get_reply{found->version};
  return wire::encode(reply, std::move(found->bytes));
}

}  // namespace sluice
