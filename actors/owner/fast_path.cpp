#include "actors/owner/fast_path.hpp"

#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {

void fast_index::publish(const std::string& key, std::uint64_t version, shared_bytes bytes, time_point expires) {
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

// --- the owner actor's changes ------------------------------------------------

std::uint64_t fast_index::begin_change(const std::string& key) {
  std::lock_guard guard{mutex_};
  entries_.erase(key);
  auto token = next_change_++;
  SLUICE_ASSERT(token != 0);
  changing_[key] = token;
  return token;
}

bool fast_index::end_change(const std::string& key, std::uint64_t token, std::optional<entry> outcome) {
  SLUICE_ASSERT(token != 0);
  std::lock_guard guard{mutex_};
  auto it = changing_.find(key);
  if (it == changing_.end() || it->second != token) return false;
  changing_.erase(it);
  if (outcome) {
    auto [e, inserted] = entries_.try_emplace(key, *outcome);
    if (!inserted && e->second.version < outcome->version) e->second = std::move(*outcome);
  }
  return true;
}

// --- slots ---------------------------------------------------------------------

void fast_index::grant(const std::vector<key_slot>& slots, std::uint64_t generation, std::uint64_t block_first,
                       std::uint64_t block_count) {
  std::lock_guard guard{mutex_};
  for (auto s : slots) {
    if (s < key_slots && given_up_at_[s] < generation) homes_.set(s);
  }
  if (block_count != 0 && block_first > block_next_) {
    block_next_ = block_first;
    block_end_ = block_first + block_count;
  }
  SLUICE_ASSERT(block_next_ <= block_end_);
}

void fast_index::give_up(key_slot slot, std::uint64_t generation) {
  std::lock_guard guard{mutex_};
  if (slot >= key_slots) return;
  homes_.reset(slot);
  given_up_at_[slot] = std::max(given_up_at_[slot], generation);
}

void fast_index::give_up_all() {
  std::lock_guard guard{mutex_};
  homes_.reset();
  // A new registration numbers grants afresh (the master may be another).
  std::fill(given_up_at_.begin(), given_up_at_.end(), 0);
  block_next_ = block_end_ = 0;
}

bool fast_index::homed(key_slot slot) const {
  std::lock_guard guard{mutex_};
  return slot < key_slots && homes_.test(slot);
}

std::size_t fast_index::homed_count() const {
  std::lock_guard guard{mutex_};
  return homes_.count();
}

std::uint64_t fast_index::versions_left() const {
  std::lock_guard guard{mutex_};
  SLUICE_ASSERT(block_next_ <= block_end_);
  return block_end_ - block_next_;
}

// --- the fast path's own commits -------------------------------------------------

std::optional<fast_index::put_outcome> fast_index::try_put(const std::string& key, const shared_bytes& value,
                                                           object_store& store, time_point now) {
  if (value.size() > max_value_bytes_.load(std::memory_order_relaxed) || !enabled(now)) return std::nullopt;
  std::lock_guard guard{mutex_};
  if (!homes_.test(slot_of(key)) || changing_.contains(key) || block_next_ >= block_end_) return std::nullopt;
  // Versions of a key only grow: the block must be ahead of every version
  // of the key held here (all of them, in a slot handed to this owner).
  auto held = store.latest(key);
  if (held >= block_next_) return std::nullopt;
  auto version = block_next_;
  SLUICE_ASSERT(version != 0);
  if (!store.put(key, version, value)) return std::nullopt;
  ++block_next_;
  SLUICE_ASSERT(block_next_ <= block_end_);
  // Just put, and nothing drops a version before the master has heard
  // of it (evictions are granted by the master): it is there. Returning
  // nothing now would hand the request to the actor after the store
  // changed, and it would put the value a second time.
  auto bytes = store.get(key, version);
  SLUICE_ASSERT(bytes.has_value());
  // The version this one replaces is nobody's current one any more: a
  // reader still holding its bytes keeps them alive.
  if (held != 0) store.drop(key, held);
  entries_[key] = entry{version, *bytes, time_point::max(), false};
  reports_.push_back(report{next_seq_++, wire::owner_commit{key, version, value.size(), held}});
  SLUICE_ASSERT(reports_.front().seq + reports_.size() == next_seq_);
  SLUICE_ASSERT(unsent_from_ < reports_.size());
  bool notify = !notified_ && reports_.size() - unsent_from_ >= reports_batch;
  if (notify) notified_ = true;
  return put_outcome{version, notify};
}

bool fast_index::notify_due() {
  std::lock_guard guard{mutex_};
  if (notified_ || unsent_from_ == reports_.size()) return false;
  notified_ = true;
  return true;
}

std::vector<fast_index::report> fast_index::take_unsent(std::size_t max) {
  std::lock_guard guard{mutex_};
  notified_ = false;
  std::vector<report> out;
  while (unsent_from_ < reports_.size() && out.size() < max) out.push_back(reports_[unsent_from_++]);
  if (!out.empty()) sent_through_ = std::max(sent_through_, out.back().seq);
  SLUICE_ASSERT(unsent_from_ <= reports_.size());
  SLUICE_ASSERT(sent_through_ < next_seq_);
  return out;
}

void fast_index::acknowledged(std::uint64_t seq) {
  std::lock_guard guard{mutex_};
  while (!reports_.empty() && reports_.front().seq <= seq) {
    reports_.pop_front();
    if (unsent_from_ > 0) --unsent_from_;
  }
  SLUICE_ASSERT(unsent_from_ <= reports_.size());
  SLUICE_ASSERT(reports_.empty() || reports_.front().seq + reports_.size() == next_seq_);
}

void fast_index::resend() {
  std::lock_guard guard{mutex_};
  unsent_from_ = 0;
}

std::uint64_t fast_index::sent_through() const {
  std::lock_guard guard{mutex_};
  return sent_through_;
}

std::uint64_t fast_index::first_unacknowledged() const {
  std::lock_guard guard{mutex_};
  return reports_.empty() ? next_seq_ : reports_.front().seq;
}

bool fast_index::unsent() const {
  std::lock_guard guard{mutex_};
  return unsent_from_ < reports_.size();
}

fast_index::arrival fast_index::first_time(std::uint64_t link, std::uint64_t sender, std::uint64_t id) {
  std::lock_guard guard{mutex_};
  std::tuple key{link, sender, (id >> 63) != 0};
  auto it = seen_.find(key);
  if (it == seen_.end()) {
    // A new sender (or top bit) on this link: within the bound only.
    auto from = seen_.lower_bound({link, 0, false});
    auto tracked = std::size_t{0};
    for (auto at = from; at != seen_.end() && std::get<0>(at->first) == link; ++at) ++tracked;
    if (tracked >= windows_per_link_max) return arrival::untracked;
    it = seen_.emplace(key, replay_window{}).first;
  }
  return it->second.first_time(id) ? arrival::first : arrival::repeat;
}

void fast_index::forget_link(std::uint64_t link) {
  std::lock_guard guard{mutex_};
  auto from = seen_.lower_bound({link, 0, false});
  auto to = from;
  while (to != seen_.end() && std::get<0>(to->first) == link) ++to;
  seen_.erase(from, to);
}

// --- serving -----------------------------------------------------------------------

namespace {

wire::outbound_frame reply_frame(const wire::envelope& request, node_id self, wire::body body,
                                 shared_bytes payload = {}) {
  // Only requests are answered: 0 is no request, and a reply to it would
  // read as a request itself.
  SLUICE_ASSERT(request.request_id != 0);
  wire::envelope reply;
  reply.reply_to = request.request_id;
  reply.source = self;
  reply.target = request.source;
  reply.body = std::move(body);
  return wire::encode(reply, std::move(payload));
}

bool plain(const wire::kv_put& p) {
  return !p.condition.any() && p.ttl_ms == 0 && p.replicas <= 1 && p.prefer_owner.empty();
}

}  // namespace

namespace {

std::optional<fast_answer> answer_fast(fast_index& index, object_store* store, node_id self, std::uint64_t link,
                                       const wire::message& msg, fast_index::time_point now) {
  // A frame for another node is a relay's to pass on, never to answer.
  if (msg.env.request_id == 0 || (msg.env.target.value != 0 && msg.env.target != self)) return std::nullopt;
  // Every request of the link passes here first: a repeat is dropped
  // whichever path served the original.
  switch (index.first_time(link, msg.env.source.value, msg.env.request_id)) {
    case fast_index::arrival::repeat: return fast_answer{std::nullopt};
    case fast_index::arrival::untracked: return std::nullopt;
    case fast_index::arrival::first: break;
  }
  if (!index.enabled(now)) return std::nullopt;
  if (auto* get = std::get_if<wire::kv_get>(&msg.env.body)) {
    auto found = index.find(get->key);
    if (!found || now >= found->expires) return std::nullopt;
    return fast_answer{reply_frame(msg.env, self, wire::kv_get_reply{found->version}, std::move(found->bytes))};
  }
  if (auto* put = std::get_if<wire::kv_put>(&msg.env.body); put != nullptr && store != nullptr && plain(*put)) {
    if (!check_key(put->key)) return std::nullopt;
    auto done = index.try_put(put->key, msg.payload, *store, now);
    if (!done) return std::nullopt;
    return fast_answer{reply_frame(msg.env, self, wire::kv_put_reply{done->version}), done->notify};
  }
  return std::nullopt;
}

}  // namespace

std::optional<fast_answer> serve_fast(fast_index& index, object_store* store, node_id self, std::uint64_t link,
                                      const wire::inbound_frame& frame, fast_index::time_point now,
                                      std::optional<wire::message>* decoded) {
  auto msg = wire::decode(wire::inbound_frame{frame.envelope, frame.payload});
  // Undecodable: the sink decodes it again and refuses it with the reason.
  if (!msg) return std::nullopt;
  auto answer = answer_fast(index, store, self, link, *msg, now);
  if (!answer && decoded != nullptr) *decoded = std::move(*msg);
  return answer;
}

fast_path_hooks make_fast_path_hooks(fast_path_deps deps) {
  SLUICE_ASSERT(deps.index != nullptr);
  SLUICE_ASSERT(deps.store != nullptr);
  SLUICE_ASSERT(deps.now != nullptr);
  SLUICE_ASSERT(deps.report_commits != nullptr);
  auto d = std::make_shared<const fast_path_deps>(std::move(deps));
  fast_path_hooks hooks;
  hooks.fast_path = [d](transport::link_id link, const wire::inbound_frame& frame,
                        std::optional<wire::message>& decoded) -> std::optional<transport::fast_taken> {
    auto answer = serve_fast(*d->index, d->store.get(), d->self, link, frame, d->now(), &decoded);
    if (!answer) return std::nullopt;
    bool tell = d->notify == commit_notify::when_idle ? answer->commits_waiting : d->index->notify_due();
    if (tell) d->report_commits();
    return transport::fast_taken{std::move(answer->reply)};
  };
  if (d->notify == commit_notify::when_idle) {
    hooks.on_idle = [d] {
      if (d->index->notify_due()) d->report_commits();
    };
  }
  return hooks;
}

}  // namespace sluice
