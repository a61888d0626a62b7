// The decode boundary: every message kind survives encode and decode, and
// no sequence of bytes a peer can send makes decode do anything but return
// a message or an errc::protocol error.
#include "runtime/wire/codec.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/rng.hpp"

namespace {

using namespace sluice;
using namespace sluice::wire;

// --- comparing decoded values ---------------------------------------------
// The message structs have no operator==, so each lists its fields once and
// `same` compares field by field.

auto fields(const hello& x) { return std::tie(x.sender_role, x.version, x.name, x.listen_address); }
auto fields(const error_reply& x) { return std::tie(x.code, x.message); }
auto fields(const ok_reply&) { return std::tie(); }
auto fields(const ping&) { return std::tie(); }
auto fields(const leave&) { return std::tie(); }
auto fields(const kv_reserve& x) {
  return std::tie(x.key, x.size, x.condition, x.ttl_ms, x.replicas, x.prefer_owner, x.min_replicas);
}
auto fields(const kv_reserve_reply& x) {
  return std::tie(x.reservation, x.where.segment, x.where.offset, x.where.length);
}
auto fields(const kv_commit& x) { return std::tie(x.reservation); }
auto fields(const kv_abort& x) { return std::tie(x.reservation); }
auto fields(const invalidate& x) { return std::tie(x.key, x.generation); }
auto fields(const commit_reply& x) { return std::tie(x.current); }
auto fields(const register_owner& x) {
  return std::tie(x.name, x.address, x.capacity_bytes, x.incarnation, x.evicts, x.commits_from);
}
auto fields(const register_owner_reply& x) { return std::tie(x.heartbeat_interval_us, x.lease_us); }
auto fields(const path_state& x) { return std::tie(x.kind, x.health, x.failures, x.retry_in_us, x.last_error, x.bytes); }
auto fields(const link_state& x) { return std::tie(x.peer, x.peer_name, x.active, x.via, x.paths); }
auto fields(const heartbeat& x) {
  return std::tie(x.used_bytes, x.object_count, x.evictions, x.sessions, x.links, x.under_replicated_puts,
                  x.owners_seen);
}
auto fields(const heartbeat_reply& x) { return std::tie(x.known, x.owners_generation, x.owners); }
auto fields(const replica& x) { return std::tie(x.owner, x.address); }
auto fields(const place& x) {
  return std::tie(x.key, x.size, x.preferred, x.condition, x.ttl_ms, x.replicas, x.prefer_owner, x.min_replicas);
}
auto fields(const place_reply& x) { return std::tie(x.version, x.target, x.extra); }
auto fields(const commit& x) { return std::tie(x.key, x.version, x.size); }
auto fields(const abort_put& x) { return std::tie(x.key, x.version); }
auto fields(const locate& x) { return std::tie(x.key); }
auto fields(const locate_reply& x) { return std::tie(x.version, x.size, x.replicas); }
auto fields(const remove_key& x) { return std::tie(x.key, x.if_version); }
auto fields(const remove_key_reply& x) { return std::tie(x.existed); }
auto fields(const drop& x) { return std::tie(x.key, x.version); }
auto fields(const fetch& x) { return std::tie(x.key, x.version); }
auto fields(const fetch_reply& x) { return std::tie(x.version); }
auto fields(const store& x) { return std::tie(x.key, x.version, x.ttl_ms, x.replica); }
auto fields(const kv_put& x) { return std::tie(x.key, x.condition, x.ttl_ms, x.replicas, x.prefer_owner, x.min_replicas); }
auto fields(const kv_put_reply& x) { return std::tie(x.version, x.copies); }
auto fields(const kv_get& x) { return std::tie(x.key); }
auto fields(const kv_get_reply& x) { return std::tie(x.version); }
auto fields(const kv_remove& x) { return std::tie(x.key, x.if_version); }
auto fields(const kv_remove_reply& x) { return std::tie(x.existed); }
auto fields(const kv_exists& x) { return std::tie(x.key); }
auto fields(const kv_exists_reply& x) { return std::tie(x.exists); }
auto fields(const wire::cluster_status&) { return std::tie(); }
auto fields(const list_keys& x) { return std::tie(x.prefix, x.start_after, x.limit); }
auto fields(const list_keys_reply& x) { return std::tie(x.keys, x.more); }
auto fields(const count_keys& x) { return std::tie(x.prefix); }
auto fields(const count_keys_reply& x) { return std::tie(x.count); }
auto fields(const evict& x) { return std::tie(x.key, x.version); }
auto fields(const evict_reply& x) { return std::tie(x.evicted); }
auto fields(const pin& x) { return std::tie(x.key, x.ttl_ms, x.session); }
auto fields(const pin_reply& x) { return std::tie(x.version); }
auto fields(const unpin& x) { return std::tie(x.key, x.session); }
auto fields(const unpin_reply& x) { return std::tie(x.was_pinned); }
auto fields(const add_replica& x) { return std::tie(x.key, x.version); }
auto fields(const add_replica_reply& x) { return std::tie(x.added); }
auto fields(const inventory& x) { return std::tie(x.after, x.entries, x.final); }
auto fields(const inventory_reply& x) { return std::tie(x.unknown); }
auto fields(const claim& x) { return std::tie(x.slots, x.versions); }
auto fields(const claim_reply& x) { return std::tie(x.granted, x.block_first, x.block_count, x.generation); }
auto fields(const owner_commit& x) { return std::tie(x.key, x.version, x.size, x.replaced); }
auto fields(const owner_commits& x) { return std::tie(x.first_seq, x.entries); }
auto fields(const owner_commits_reply& x) { return std::tie(x.refused); }
auto fields(const barrier&) { return std::tie(); }
auto fields(const flushed& x) { return std::tie(x.seq); }
auto fields(const fetch_range& x) { return std::tie(x.key, x.version, x.offset, x.length, x.rdma); }
auto fields(const rdma_endpoint& x) { return std::tie(x.qp_number, x.packet_sequence, x.lid, x.gid); }
auto fields(const rdma_segment& x) { return std::tie(x.segment, x.address, x.length, x.rkey); }
auto fields(const rdma_connect& x) { return std::tie(x.provider, x.endpoint); }
auto fields(const rdma_connect_reply& x) { return std::tie(x.provider, x.endpoint, x.segments); }
auto fields(const rdma_lease& x) {
  return std::tie(x.lease, x.version, x.where.segment, x.where.offset, x.where.length, x.address, x.rkey, x.lease_us);
}
auto fields(const rdma_release& x) { return std::tie(x.lease); }
auto fields(const rpc_instance& x) {
  return std::tie(x.name, x.client, x.client_name, x.owner, x.owner_address, x.max_concurrent);
}
auto fields(const rpc_serve& x) { return std::tie(x.name, x.max_concurrent); }
auto fields(const rpc_unserve& x) { return std::tie(x.name); }
auto fields(const rpc_sync& x) { return std::tie(x.instances); }
auto fields(const rpc_lookup& x) { return std::tie(x.name, x.prefix); }
auto fields(const rpc_instances& x) { return std::tie(x.instances); }
auto fields(const rpc_call& x) { return std::tie(x.method, x.target, x.routing, x.args_buffer, x.caller); }
auto fields(const rpc_reply& x) { return std::tie(x.result_buffer); }
auto fields(const rpc_cancel& x) { return std::tie(x.call); }
auto fields(const rpc_buffer& x) { return std::tie(x.size); }
auto fields(const rpc_buffer_reply& x) { return std::tie(x.buffer, x.where.segment, x.where.offset, x.where.length); }
auto fields(const rpc_release& x) { return std::tie(x.buffer); }
auto fields(const rpc& x) { return std::tie(x.body); }
// The mq values inside these (configs, messages, deliveries, ...) have
// operator==; the messages themselves do not.
auto fields(const mq_create_topic& x) { return std::tie(x.topic, x.config); }
auto fields(const mq_topic_created& x) { return std::tie(x.created); }
auto fields(const mq_delete_topic& x) { return std::tie(x.topic); }
auto fields(const mq_list_topics&) { return std::tie(); }
auto fields(const mq_topics& x) { return std::tie(x.topics); }
auto fields(const mq_produce& x) { return std::tie(x.topic, x.session, x.messages); }
auto fields(const mq_produced& x) { return std::tie(x.results); }
auto fields(const mq_join& x) { return std::tie(x.group, x.session, x.config, x.lease_ms); }
auto fields(const mq_joined& x) { return std::tie(x.assigned); }
auto fields(const mq_leave& x) { return std::tie(x.group, x.session); }
auto fields(const mq_poll& x) {
  return std::tie(x.group, x.session, x.max_messages, x.max_bytes, x.wait_ms, x.poll_seq, x.answered_seq, x.settles);
}
auto fields(const mq_polled& x) { return std::tie(x.deliveries); }
auto fields(const mq_settle& x) {
  return std::tie(x.group, x.session, x.kind, x.partition, x.offset, x.generation, x.delay_ms, x.answered_seq);
}
auto fields(const mq_settled& x) { return std::tie(x.count); }
auto fields(const mq_seek& x) { return std::tie(x.group, x.partition, x.by_time, x.offset, x.time_ms); }
auto fields(const mq_group_status& x) { return std::tie(x.group); }
auto fields(const mq_group_status_reply& x) { return std::tie(x.partitions); }
auto fields(const mq_delete_group& x) { return std::tie(x.group); }
auto fields(const mq_prefetch& x) { return std::tie(x.payload, x.version, x.size, x.holders); }
auto fields(const mq& x) { return std::tie(x.body); }
auto fields(const member_status& x) {
  return std::tie(x.id, x.member_role, x.name, x.address, x.state, x.capacity_bytes, x.used_bytes,
                  x.object_count, x.last_heartbeat_age_us, x.evictions, x.stored_bytes, x.stored_objects,
                  x.home_slots, x.own_commits, x.links, x.under_replicated_puts, x.master_via);
}
auto fields(const sluice::repair_status& x) {
  return std::tie(x.under_replicated, x.without_live_copy, x.copies_in_flight, x.copies_made, x.bytes_copied,
                  x.copies_failed);
}
auto fields(const cluster_status_reply& x) { return std::tie(x.master, x.object_count, x.members, x.repair); }
auto fields(const repair_copy& x) { return std::tie(x.key, x.version, x.size, x.holders); }
auto fields(const envelope& x) {
  return std::tie(x.request_id, x.reply_to, x.source, x.target, x.deadline_us, x.hops, x.after, x.body);
}

template <class T>
concept has_fields = requires(const T& x) {
  fields(x);
};

template <class T>
bool same(const T& a, const T& b);
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b);
bool same(const body& a, const body& b);
bool same(const rpc_body& a, const rpc_body& b);
bool same(const mq_body& a, const mq_body& b);

template <class... Ts, std::size_t... I>
bool same_each(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b, std::index_sequence<I...>) {
  return (same(std::get<I>(a), std::get<I>(b)) && ...);
}

template <class T>
bool same(const T& a, const T& b) {
  if constexpr (has_fields<T>) {
    using tuple = decltype(fields(a));
    return same_each(fields(a), fields(b), std::make_index_sequence<std::tuple_size_v<tuple>>{});
  } else {
    return a == b;
  }
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

bool same(const body& a, const body& b) {
  if (a.index() != b.index()) return false;
  return std::visit([&b](const auto& x) { return same(x, std::get<std::decay_t<decltype(x)>>(b)); },
                    a);
}

bool same(const rpc_body& a, const rpc_body& b) {
  if (a.index() != b.index()) return false;
  return std::visit([&b](const auto& x) { return same(x, std::get<std::decay_t<decltype(x)>>(b)); },
                    a);
}

bool same(const mq_body& a, const mq_body& b) {
  if (a.index() != b.index()) return false;
  return std::visit([&b](const auto& x) { return same(x, std::get<std::decay_t<decltype(x)>>(b)); },
                    a);
}

// --- samples -----------------------------------------------------------------

// Keys are bytes, not text: NUL bytes and invalid UTF-8 must survive.
const std::string key_with_nul{"a\0b\0", 4};
const std::string key_not_utf8{"\xff\xfe\xc0\x80\x80", 5};

member_status sample_member(std::uint64_t i) {
  member_status m;
  m.id = node_id{i + 1};
  m.member_role = i % 3 == 0 ? role::master : (i % 3 == 1 ? role::owner : role::client);
  m.name = "node-" + std::to_string(i);
  m.address = i % 7 == 0 ? "" : "10.0." + std::to_string(i % 256) + ".1:7070";
  m.state = i % 2 == 0 ? member_state::up : member_state::down;
  m.capacity_bytes = (i + 1) << 30;
  m.used_bytes = i * 4096;
  m.object_count = i * 3;
  m.last_heartbeat_age_us = ~std::uint64_t{0} - i;
  m.evictions = i * 11;
  m.stored_bytes = i * 5000;
  m.stored_objects = i * 4;
  m.home_slots = static_cast<std::uint32_t>(i % 1025);
  m.own_commits = i * 1'000'003;
  m.under_replicated_puts = i * 13;
  if (i % 4 == 3) m.master_via = node_id{i + 50};
  if (i % 5 == 1) {
    m.links.push_back(link_state{node_id{i + 100}, "owner-" + std::to_string(i), "relay", node_id{i + 7},
                                 {path_state{"tcp", "down", 3, 4'000'000, "timeout: no reply before the deadline"},
                                  path_state{"relay", "up", 0, 0, ""}}});
    m.links.push_back(link_state{node_id{i + 101}, "", "", node_id{}, {}});
  }
  return m;
}

// Every field away from its default, and a second config at the edges.
const mq_topic_config topic_config{12, 86'400'000, 1ULL << 40, 1'000'000, mq_full::drop_oldest,
                                   3, 64ULL << 20, 60'000, 4096};
const mq_topic_config edge_topic_config{~std::uint32_t{0}, INT64_MIN, ~std::uint64_t{0}, ~std::uint64_t{0},
                                        mq_full::reject, 0, ~std::uint64_t{0}, INT64_MAX, ~std::uint64_t{0}};
const mq_group_config group_config{{"orders", key_with_nul}, 30'000, 5, 16, mq_start_at::latest};

// At least one sample of every kind in `mq_body`, each with every field
// away from its default in at least one sample.
std::vector<body> sample_mq_bodies() {
  const auto max = ~std::uint64_t{0};
  const auto max32 = ~std::uint32_t{0};
  return {
      mq{mq_create_topic{"orders", topic_config}},
      mq{mq_create_topic{"", edge_topic_config}},
      mq{mq_topic_created{true}},
      mq{mq_delete_topic{"orders"}},
      // A name with a NUL arrives whole, for the master to refuse, not cut short.
      mq{mq_delete_topic{key_with_nul}},
      mq{mq_list_topics{}},
      mq{mq_topics{{}}},
      mq{mq_topics{{{"orders", topic_config, {{1, 2, 3}, {max, max, max}}}, {"refunds", edge_topic_config, {}}}}},
      mq{mq_produce{"orders", 0xa1, {}}},
      mq{mq_produce{"orders", max,
                    {{key_with_nul, 4096, key_not_utf8, "customer-7", true, 5},
                     {"p/2", max, "", "", false, 0},
                     {"p/3", 1, "id", key_with_nul, true, max32}}}},
      mq{mq_produced{{{errc::overloaded, "partition 3 is full", 3, 17, true},
                      {errc::ok, "", max32, max, false}}}},
      mq{mq_join{"workers", 0xb2, group_config, 10'000}},
      mq{mq_join{"", max, mq_group_config{{}, INT64_MIN, max32, max32, mq_start_at::earliest}, max}},
      mq{mq_joined{{{"orders", 1}, {key_not_utf8, max32}}}},
      mq{mq_leave{"workers", 0xb2}},
      mq{mq_poll{"workers", 0xb2, 100, 1 << 20, 5000}},
      mq{mq_poll{"w", max, max32, max, max}},
      mq{mq_poll{"workers", 0xb2, 64, 0, 100, 9, 8,
                 {{"", 0, mq_settle_kind::ack, {"orders", 2}, 41, 7, 0, 0},
                  {"workers", max, mq_settle_kind::nack, {"orders", max32}, max, max, INT64_MIN, max},
                  {"", 0, mq_settle_kind::ack_upto, {key_not_utf8, 0}, 40, 0, 0, 8}}}},
      mq{mq_polled{{{{"orders", 2}, 41, key_with_nul, 4096, 3, 7, 1'700'000'000'000},
                    {{"refunds", max32}, max, "", max, max32, max, INT64_MIN}}}},
      mq{mq_settle{"workers", 0xb2, mq_settle_kind::nack, {"orders", 2}, 41, 7, 2500}},
      mq{mq_settle{"workers", max, mq_settle_kind::ack_upto, {"orders", max32}, max, max, INT64_MAX}},
      mq{mq_settled{12}},
      mq{mq_seek{"workers", {"orders", 2}, true, 99, 1'700'000'000'000}},
      mq{mq_seek{"workers", {"orders", max32}, false, max, INT64_MIN}},
      mq{mq_group_status{"workers"}},
      mq{mq_group_status{""}},
      mq{mq_group_status_reply{{{"workers", {"orders", 2}, 0xb2, 7, 40, 45, 3, 100, 409600},
                                {"w", {"o", max32}, max, max, max, max, max, max, max}}}},
      mq{mq_delete_group{"workers"}},
      mq{mq_prefetch{"~mq/orders/1", 7, 64 << 20, {{node_id{1}, "10.0.0.1:7000"}, {node_id{max}, ""}}}},
      mq{mq_prefetch{key_with_nul, max, max, {}}},
  };
}

cluster_status_reply large_status(std::size_t members) {
  cluster_status_reply out{node_id{0xa1}, 123456789, {}};
  for (std::size_t i = 0; i < members; ++i) out.members.push_back(sample_member(i));
  if (members > 0) out.repair = {members, 2, 3, ~std::uint64_t{0}, 1ULL << 40, 5};
  return out;
}

// At least one sample of every kind in `body`, with edge values.
std::vector<body> sample_bodies() {
  const auto max = ~std::uint64_t{0};
  const auto max32 = ~std::uint32_t{0};
  return {
      hello{role::owner, protocol_version, "owner-1", "10.0.0.1:7070"},
      hello{role::client, 0xffff, "", ""},
      error_reply{errc::not_found, "key 'a' has no committed version"},
      error_reply{errc::cancelled, ""},
      ok_reply{},
      ping{},
      leave{},
      kv_reserve{"reserved\0key", 1ULL << 33, {}, 0, 1, ""},
      kv_reserve{"cond", 1, put_condition{true, 0}, 1, 3, "owner-b"},
      kv_reserve{"cond", 1, put_condition{false, max}, max, 255, ""},
      kv_reserve{"min", 1, {}, 0, 3, "", 2},
      kv_reserve_reply{77, pool_region{3, 1ULL << 40, 4096}},
      kv_commit{77},
      kv_abort{78},
      invalidate{"gone\xff", 0},
      invalidate{"g", max},
      commit_reply{true},
      register_owner{"owner-2", "tcp://[::1]:7071", 1ULL << 40, 0x1234abcdULL, false, 1},
      register_owner{"owner-3", "", 1, max, true, max},
      register_owner_reply{500'000, 1'500'000},
      heartbeat{max, 0, 0, {}, {}},
      heartbeat{1, 2, max, {1, max, 3}, {}},
      heartbeat{0, 0, 0, {}, {link_state{node_id{max}, "b", "tcp", node_id{}, {path_state{"tcp", "up", 0, 0, ""}}}}},
      heartbeat{0, 0, 0, {}, {}, max},
      heartbeat{0, 0, 0, {}, {}, 0, max},
      heartbeat_reply{true, 0, {}},
      heartbeat_reply{false, 0, {}},
      heartbeat_reply{true, max, {owner_address{node_id{7}, "owner-b", "10.0.0.2:7070"}, owner_address{}}},
      place{key_with_nul, 1ULL << 30, node_id{7}, {}, 0, 1, ""},
      place{"p", 0, node_id{7}, put_condition{true, 0}, 60000, 2, "owner@10.0.0.1:7070"},
      place{"p", 0, node_id{7}, put_condition{false, 12}, max, 255, ""},
      place{"p", 0, node_id{7}, {}, 0, 4, "", 1},
      place_reply{42, replica{node_id{9}, "10.0.0.9:7070"}, {}},
      place_reply{43, replica{node_id{9}, "a"}, {{node_id{1}, "b:1"}, {node_id{max}, ""}}},
      commit{key_not_utf8, max, 0},
      abort_put{"", 3},
      locate{key_with_nul},
      locate_reply{5, 1024, {{node_id{1}, "a"}, {node_id{2}, ""}, {node_id{max}, "c:1"}}},
      locate_reply{0, 0, {}},
      remove_key{key_not_utf8},
      remove_key{"r", max},
      remove_key_reply{true},
      drop{"k", 1},
      fetch{key_with_nul, 8},
      fetch_reply{8},
      store{key_not_utf8, 9, 0, false},
      store{"t", 1, max, true},
      kv_put{"", {}, 0, 1, ""},
      kv_put{"c", put_condition{true, 0}, 5, 2, "o"},
      kv_put{"c", put_condition{false, 99}, max, 255, ""},
      kv_put{"m", {}, 0, 255, "", 255},
      kv_put_reply{max},
      kv_put_reply{max, 2},
      kv_put_reply{7, 255},
      kv_get{std::string(1000, 'k')},
      kv_get_reply{1},
      kv_remove{key_with_nul},
      kv_remove{"r", 5},
      kv_remove_reply{false},
      kv_exists{key_not_utf8},
      kv_exists_reply{true},
      wire::cluster_status{},
      list_keys{"", "", 0},
      list_keys{key_with_nul, key_not_utf8, 0xffffffffU},
      list_keys_reply{{}, false},
      list_keys_reply{{{key_with_nul, 1, 0}, {"b", max, max}}, true},
      count_keys{""},
      count_keys{"pre/"},
      count_keys_reply{max},
      evict{key_with_nul, max},
      evict_reply{true},
      evict_reply{false},
      pin{key_with_nul, 0, 0},
      pin{"p", max, max},
      pin_reply{max},
      unpin{key_not_utf8, 0},
      unpin{"u", 7},
      unpin_reply{true},
      add_replica{key_with_nul, max},
      add_replica_reply{true},
      repair_copy{key_with_nul, max, max, {}},
      repair_copy{"r", 3, 64 << 20, {{node_id{1}, "10.0.0.1:7000"}, {node_id{max}, ""}}},
      inventory{"", {}, true},
      inventory{key_with_nul, {{"a", 1}, {key_not_utf8, max}}, false},
      inventory_reply{{}},
      inventory_reply{{{"x", 3}}},
      claim{{}, true},
      claim{{0, 1, 1023, 0xffff}, false},
      claim_reply{{}, 0, 0, 0},
      claim_reply{{5, 1023}, max - 4096, 4096, max},
      owner_commits{1, {}},
      owner_commits{max, {{key_with_nul, 1, 0, 0}, {key_not_utf8, max, max, max - 1}}},
      owner_commits_reply{{}},
      owner_commits_reply{{{"y", 9}}},
      barrier{},
      flushed{0},
      flushed{max},
      fetch_range{key_with_nul, 4, 0, 0},
      fetch_range{"f", max, max, max},
      fetch_range{"r", 7, 0, 64 << 20, true},
      rdma_connect{"soft", {}},
      rdma_connect{"verbs", {max32, 0x123456, 0xffff, std::string(16, '\xfe')}},
      rdma_connect_reply{"verbs", {1, 2, 3, std::string(16, '\0')}, {}},
      rdma_connect_reply{"soft", {}, {{0, max, max, max32}, {7, 0x7f0000000000, 1ULL << 30, 5}}},
      rdma_lease{1, 2, pool_region{3, 4096, 64 << 20}, 0x7f0000001000, 77, 5'000'000},
      rdma_lease{max, max, pool_region{max32, max, max}, max, max32, max},
      rdma_release{0},
      rdma_release{max},
      large_status(0),
      large_status(1000),
      rpc{rpc_serve{"embed", 64}},
      rpc{rpc_serve{std::string(255, 'n'), 0xffffffffU}},
      rpc{rpc_serve{"tokens", 16, true}},
      rpc{rpc_unserve{"embed"}},
      rpc{rpc_sync{{}}},
      rpc{rpc_sync{{{"a", node_id{1}, "c", node_id{2}, "", 1}, {"b/c:d@e", node_id{max}, "", node_id{max}, "x:1", 0}}}},
      rpc{rpc_sync{{{"tokens", node_id{3}, "c", node_id{4}, "", 16, true}}}},
      rpc{rpc_lookup{"", true}},
      rpc{rpc_lookup{"embed", false}},
      rpc{rpc_instances{{{"a", node_id{1}, "client", node_id{2}, "10.0.0.2:7070", 8}}}},
      rpc{rpc_call{"embed", node_id{}, rpc_routing::round_robin, 0, node_id{}}},
      rpc{rpc_call{"embed", node_id{max}, rpc_routing::least_outstanding, max, node_id{7}}},
      rpc{rpc_reply{0}},
      rpc{rpc_reply{max}},
      rpc{rpc_cancel{max}},
      rpc{rpc_buffer{1ULL << 40}},
      rpc{rpc_buffer_reply{5, pool_region{1, 4096, 64 << 20}}},
      rpc{rpc_release{5}},
  };
}

std::vector<body> all_sample_bodies() {
  auto out = sample_bodies();
  auto more = sample_mq_bodies();
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

envelope sample_envelope(body b) {
  envelope env;
  env.request_id = 0x0123456789abcdefULL;
  env.reply_to = 0xfedcba9876543210ULL;
  env.source = node_id{0xa1};
  env.target = node_id{0xb2};
  env.deadline_us = 2'500'000;
  env.hops = 255;
  env.after = 0x1122334455667788ULL;
  env.body = std::move(b);
  return env;
}

// --- bytes ---------------------------------------------------------------------

using bytes = std::vector<std::byte>;

bytes frame_bytes(const envelope& env, shared_bytes payload = {}) {
  auto flat = flatten(encode(env, std::move(payload)));
  return bytes(flat.data(), flat.data() + flat.size());
}

bytes frame_bytes_of(const outbound_frame& frame) {
  auto flat = flatten(frame);
  return bytes(flat.data(), flat.data() + flat.size());
}

result<message> decode_vector(const bytes& frame, const frame_limits& limits = {}) {
  return decode_bytes(std::span<const std::byte>{frame.data(), frame.size()}, limits);
}

void put_le(bytes& frame, std::size_t at, std::uint64_t value, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i)
    frame[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

std::uint64_t get_le(const bytes& frame, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value |= std::to_integer<std::uint64_t>(frame[at + i]) << (8 * i);
  return value;
}

// Header field offsets (docs/wire-format.md).
constexpr std::size_t envelope_bytes_at = 8;
constexpr std::size_t payload_bytes_at = 16;

// A whole frame around hand-written envelope words, for inputs encode()
// would never produce.
bytes frame_around(const std::vector<std::uint64_t>& words) {
  bytes frame(frame_header_bytes + words.size() * 8);
  auto head = encode_frame_header(
      frame_header{frame_version, 0, static_cast<std::uint32_t>(words.size() * 8), 0});
  std::memcpy(frame.data(), head.data(), head.size());
  for (std::size_t i = 0; i < words.size(); ++i)
    put_le(frame, frame_header_bytes + 8 * i, words[i], 8);
  return frame;
}

// A Cap'n Proto struct pointer: offset in words from the pointer's end.
std::uint64_t struct_pointer(std::uint32_t offset, std::uint16_t data_words,
                             std::uint16_t pointers) {
  return (std::uint64_t{offset} << 2) | (std::uint64_t{data_words} << 32) |
         (std::uint64_t{pointers} << 48);
}

// An envelope whose body is a cluster_status_reply listing `count` members
// of size zero: a list that claims many elements without sending their
// bytes (the classic amplification attack on Cap'n Proto readers).
bytes status_with_empty_members(std::uint32_t count) {
  constexpr std::uint64_t cluster_status_reply_tag = 28;  // union tag in sluice.capnp
  // clang-format off
  std::vector<std::uint64_t> segment = {
      struct_pointer(0, 7, 1),          // root: Envelope, 7 data words, 1 pointer
      0, 0, 0, 0, 0,                    // requestId, replyTo, source, target, deadlineUs
      cluster_status_reply_tag << 16,   // hops = 0 (byte 40), body tag (bytes 42-43)
      0,                                // fetchReply and the like (unused by this kind)
      struct_pointer(0, 2, 1),          // body: ClusterStatusReply, 2 data words, 1 pointer
      0, 0,                             // master, objectCount
      1 | (7ULL << 32),                 // members: inline-composite list of 0 words
      std::uint64_t{count} << 2,        // list tag: `count` elements of 0 data, 0 pointers
  };
  // clang-format on
  std::vector<std::uint64_t> words = {std::uint64_t{segment.size()} << 32};  // 1 segment
  words.insert(words.end(), segment.begin(), segment.end());
  return frame_around(words);
}

}  // namespace

TEST_CASE("wire: every message kind survives encode and decode with all fields") {
  auto samples = all_sample_bodies();
  std::set<std::size_t> kinds;
  std::set<std::size_t> rpc_kinds;
  std::set<std::size_t> mq_kinds;
  for (const auto& b : samples) {
    kinds.insert(b.index());
    if (auto* r = std::get_if<rpc>(&b)) rpc_kinds.insert(r->body.index());
    if (auto* m = std::get_if<mq>(&b)) mq_kinds.insert(m->body.index());
    CAPTURE(body_name(b));
    auto env = sample_envelope(b);
    auto decoded = decode_vector(frame_bytes(env));
    REQUIRE(decoded.ok());
    CHECK(same(decoded->env, env));
    CHECK(decoded->payload.empty());
  }
  CHECK(kinds.size() == std::variant_size_v<body>);
  CHECK(rpc_kinds.size() == std::variant_size_v<rpc_body>);
  CHECK(mq_kinds.size() == std::variant_size_v<mq_body>);
}

TEST_CASE("wire: relabel passes a frame on with new ids and everything else as it was") {
  auto env = sample_envelope(rpc{rpc_call{"embed", node_id{3}, rpc_routing::least_outstanding, 0, node_id{9}}});
  auto frame = encode(env, shared_bytes::copy_of(std::string_view{"args"}));
  inbound_frame in{frame.head.slice(frame_header_bytes, frame.head.size() - frame_header_bytes), frame.payload};
  auto out = relabel(in, {7, 8, node_id{0xc3}}, shared_bytes::copy_of(std::string_view{"other"}));
  REQUIRE(out.has_value());
  auto decoded = decode_vector(frame_bytes_of(*out));
  REQUIRE(decoded.ok());
  env.request_id = 7;
  env.reply_to = 8;
  env.target = node_id{0xc3};
  CHECK(same(decoded->env, env));
  CHECK(decoded->payload.as_string_view() == "other");
  // A big envelope spans segments the same way: still relabelled right.
  auto big = sample_envelope(large_status(1000));
  auto big_frame = encode(big);
  auto relabelled = relabel(
      inbound_frame{big_frame.head.slice(frame_header_bytes, big_frame.head.size() - frame_header_bytes), {}},
      {1, 2, node_id{3}}, {});
  REQUIRE(relabelled.has_value());
  auto again = decode_vector(frame_bytes_of(*relabelled));
  REQUIRE(again.ok());
  big.request_id = 1;
  big.reply_to = 2;
  big.target = node_id{3};
  CHECK(same(again->env, big));
}

TEST_CASE("wire: peek reads a frame's ids and whether it is rpc without decoding the rest") {
  auto env = sample_envelope(rpc{rpc_call{"embed", node_id{3}, rpc_routing::round_robin, 0, node_id{}}});
  auto frame = encode(env);
  inbound_frame in{frame.head.slice(frame_header_bytes, frame.head.size() - frame_header_bytes), {}};
  auto head = peek(in);
  REQUIRE(head.has_value());
  CHECK(head->request_id == env.request_id);
  CHECK(head->reply_to == env.reply_to);
  CHECK(head->rpc);
  auto kv = encode(sample_envelope(kv_get{"k"}));
  auto kv_head = peek(inbound_frame{kv.head.slice(frame_header_bytes, kv.head.size() - frame_header_bytes), {}});
  REQUIRE(kv_head.has_value());
  CHECK_FALSE(kv_head->rpc);
  // Garbage is not peeked at: decode says why.
  auto junk = byte_buffer::allocate(64);
  std::memset(junk.data(), 0xff, junk.size());
  CHECK_FALSE(peek(inbound_frame{std::move(junk).freeze(), {}}).has_value());
}

TEST_CASE("wire: envelope fields at zero survive encode and decode") {
  envelope env;
  env.body = kv_get{"k"};
  auto decoded = decode_vector(frame_bytes(env));
  REQUIRE(decoded.ok());
  CHECK(same(decoded->env, env));
}

TEST_CASE("wire: a 1 MiB payload travels after the envelope byte for byte") {
  auto buffer = byte_buffer::allocate(1 << 20);
  for (std::size_t i = 0; i < buffer.size(); ++i)
    buffer.data()[i] = static_cast<std::byte>((i * 131) >> 3);
  auto payload = std::move(buffer).freeze();
  auto env = sample_envelope(kv_put{key_with_nul, {}, 0, 1, ""});

  auto frame = encode(env, payload);
  CHECK(frame.payload.data() == payload.data());  // the payload is not copied into the head
  CHECK(frame.head.size() % 8 == 0);
  auto decoded = decode_vector(frame_bytes(env, payload));
  REQUIRE(decoded.ok());
  CHECK(same(decoded->env, env));
  REQUIRE(decoded->payload.size() == payload.size());
  CHECK(std::memcmp(decoded->payload.data(), payload.data(), payload.size()) == 0);
}

TEST_CASE("wire: a frame with a payload larger than the configured limit is rejected") {
  auto frame =
      frame_bytes(sample_envelope(kv_put{"k", {}, 0, 1, ""}), shared_bytes::copy_of(std::string(100, 'v')));
  frame_limits limits;
  limits.max_payload_bytes = 99;
  auto decoded = decode_vector(frame, limits);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
}

TEST_CASE("wire: a truncated frame is rejected at every cut point") {
  auto env = sample_envelope(large_status(3));
  auto frame = frame_bytes(env, shared_bytes::copy_of(std::string(100, 'p')));
  REQUIRE(decode_vector(frame).ok());
  for (std::size_t cut = 0; cut < frame.size(); ++cut) {
    CAPTURE(cut);
    bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(cut));
    auto decoded = decode_vector(prefix);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.code() == errc::protocol);
  }
}

TEST_CASE("wire: an envelope cut short at every word is rejected even when the header agrees") {
  auto frame = frame_bytes(sample_envelope(large_status(3)));
  const std::size_t words = (frame.size() - frame_header_bytes) / 8;
  for (std::size_t keep = 1; keep < words; ++keep) {
    CAPTURE(keep);
    bytes cut(frame.begin(),
              frame.begin() + static_cast<std::ptrdiff_t>(frame_header_bytes + keep * 8));
    put_le(cut, envelope_bytes_at, keep * 8, 4);
    auto decoded = decode_vector(cut);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.code() == errc::protocol);
  }
}

TEST_CASE("wire: a frame with the wrong magic is rejected") {
  auto frame = frame_bytes(sample_envelope(ok_reply{}));
  std::memcpy(frame.data(), "GET ", 4);
  auto decoded = decode_vector(frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("magic") != std::string::npos);
}

TEST_CASE("wire: a header claiming more bytes than the limits allow is rejected") {
  auto frame = frame_bytes(sample_envelope(ok_reply{}));
  SUBCASE("envelope") { put_le(frame, envelope_bytes_at, 0xfffffff8U, 4); }
  SUBCASE("payload") { put_le(frame, payload_bytes_at, 1ULL << 62, 8); }
  auto decoded = decode_vector(frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("exceeds the limit") != std::string::npos);
}

TEST_CASE("wire: a header whose sizes disagree with the frame length is rejected") {
  auto frame = frame_bytes(sample_envelope(ok_reply{}));
  SUBCASE("one byte of payload too many") { frame.push_back(std::byte{0}); }
  SUBCASE("the payload size claims one byte that never came") {
    put_le(frame, payload_bytes_at, 1, 8);
  }
  auto decoded = decode_vector(frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
}

TEST_CASE("wire: header sizes whose sum wraps around 64 bits are rejected under unlimited limits") {
  // With no payload limit, 24 + envelope + payload can overflow; decode
  // must compare sizes without adding them.
  auto frame = frame_bytes(sample_envelope(ok_reply{}));
  const auto envelope_size = get_le(frame, envelope_bytes_at, 4);
  frame_limits unlimited{~std::uint64_t{0}, ~std::uint64_t{0}};
  SUBCASE("the sum wraps to a length that cuts the envelope short") {
    put_le(frame, payload_bytes_at, 0 - (envelope_size - 8), 8);
    frame.resize(frame_header_bytes + 8);
  }
  SUBCASE("the sum wraps to the header length") {
    put_le(frame, payload_bytes_at, 0 - envelope_size, 8);
    frame.resize(frame_header_bytes);
  }
  auto decoded = decode_vector(frame, unlimited);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
}

TEST_CASE("wire: a segment table claiming huge segments is rejected") {
  auto frame = frame_bytes(sample_envelope(locate{"k"}));
  const std::size_t table = frame_header_bytes;
  SUBCASE("a huge first segment") { put_le(frame, table + 4, 0xffffffffU, 4); }
  SUBCASE("a first segment one word longer than the envelope") {
    put_le(frame, table + 4, get_le(frame, table + 4, 4) + 1, 4);
  }
  SUBCASE("a huge segment count") { put_le(frame, table, 0x7fffffffU, 4); }
  SUBCASE("a segment count that wraps") { put_le(frame, table, 0xffffffffU, 4); }
  SUBCASE("a second segment that never came") {
    put_le(frame, table, 1, 4);
    put_le(frame, table + 8, 0x10000000U, 4);  // overwrites the root pointer too
  }
  auto decoded = decode_vector(frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
}

TEST_CASE("wire: a list of empty members within the traversal limit decodes") {
  // The control for the next test: the hand-written envelope is valid.
  auto decoded = decode_vector(status_with_empty_members(3));
  REQUIRE(decoded.ok());
  auto* status = std::get_if<cluster_status_reply>(&decoded->env.body);
  REQUIRE(status != nullptr);
  CHECK(status->members.size() == 3);
}

TEST_CASE("wire: a list that claims millions of empty members is rejected") {
  auto decoded = decode_vector(status_with_empty_members(1U << 28));
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("traversal limit") != std::string::npos);
}

TEST_CASE("wire: an envelope with trailing junk words is rejected") {
  auto frame = frame_bytes(sample_envelope(kv_get{"k"}));
  const auto envelope_size = get_le(frame, envelope_bytes_at, 4);
  frame.insert(frame.end(), 16, std::byte{0x5a});
  put_le(frame, envelope_bytes_at, envelope_size + 16, 4);
  auto decoded = decode_vector(frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("trailing") != std::string::npos);
}

TEST_CASE("wire: an error reply with code 0 is rejected") {
  auto decoded = decode_vector(frame_bytes(sample_envelope(error_reply{errc::ok, "fine"})));
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
}

TEST_CASE("wire: an error code this build does not know decodes as internal") {
  for (std::uint16_t code :
       {std::uint16_t{static_cast<std::uint16_t>(errc_last) + 1}, std::uint16_t{0xffff}}) {
    CAPTURE(code);
    auto decoded = decode_vector(
        frame_bytes(sample_envelope(error_reply{static_cast<errc>(code), "from the future"})));
    REQUIRE(decoded.ok());
    auto* reply = std::get_if<error_reply>(&decoded->env.body);
    REQUIRE(reply != nullptr);
    CHECK(reply->code == errc::internal);
    CHECK(reply->message == "from the future");
  }
}

TEST_CASE("wire: every pinned error code survives encode and decode") {
  for (auto n = 1U; n <= static_cast<unsigned>(errc_last); ++n) {
    auto code = static_cast<errc>(n);
    CAPTURE(to_string(code));
    auto decoded = decode_vector(frame_bytes(sample_envelope(error_reply{code, "m"})));
    REQUIRE(decoded.ok());
    CHECK(std::get<error_reply>(decoded->env.body).code == code);
  }
}

TEST_CASE("wire: peek_reply_to reads a reply's request id without decoding the body") {
  auto env = sample_envelope(fetch_reply{3});
  auto frame = encode(env, shared_bytes::copy_of("payload"));
  auto envelope = frame.head.slice(frame_header_bytes, frame.head.size() - frame_header_bytes);
  CHECK(peek_reply_to(envelope.span()) == env.reply_to);
  env.reply_to = 0;
  auto request = encode(env);
  CHECK(peek_reply_to(request.head.slice(frame_header_bytes, request.head.size() - frame_header_bytes).span()) == 0);
}

TEST_CASE("wire: peek_reply_to answers nothing for malformed envelope words") {
  alignas(8) std::array<std::byte, 16> garbage{};
  garbage.fill(std::byte{0xff});
  CHECK_FALSE(peek_reply_to(std::span<const std::byte>{garbage}).has_value());
  CHECK_FALSE(peek_reply_to(std::span<const std::byte>{}).has_value());
}

TEST_CASE("wire: a message kind from a newer protocol is rejected") {
  // ok and cluster_status are both Void members: their frames differ only
  // in the union tag, which this test overwrites with one no build knows.
  auto ok_frame = frame_bytes(sample_envelope(ok_reply{}));
  auto status_frame = frame_bytes(sample_envelope(wire::cluster_status{}));
  REQUIRE(ok_frame.size() == status_frame.size());
  std::vector<std::size_t> differ;
  for (std::size_t i = 0; i < ok_frame.size(); ++i) {
    if (ok_frame[i] != status_frame[i]) differ.push_back(i);
  }
  REQUIRE(differ.size() == 1);
  put_le(ok_frame, differ[0], 0x1234, 2);
  auto decoded = decode_vector(ok_frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("unknown message kind") != std::string::npos);
}

TEST_CASE("wire: random and mutated bytes never crash the decoder") {
  // Each input either decodes (and then encodes and decodes again) or
  // fails with errc::protocol. A failure names the seed and the iteration.
  const std::uint64_t seed = 0x5eed'0f'f00d;
  rng random{seed};
  const std::vector<bytes> originals = {
      frame_bytes(sample_envelope(large_status(4))),
      frame_bytes(sample_envelope(locate_reply{1, 2, {{node_id{1}, "a"}, {node_id{2}, "b"}}})),
      frame_bytes(sample_envelope(kv_put{key_with_nul, {}, 0, 1, ""}),
                  shared_bytes::copy_of(std::string(40, 'v'))),
      frame_bytes(sample_envelope(hello{role::owner, 1, "n", "a"})),
      frame_bytes(sample_envelope(mq{mq_polled{{{{"orders", 2}, 41, "payload/41", 4096, 3, 7, 1'700'000'000'000},
                                                {{"orders", 3}, 9, "payload/9", 1, 1, 8, 0}}}})),
  };
  auto random_byte = [&random] { return static_cast<std::byte>(random.uniform(256)); };
  std::size_t decoded_count = 0;
  for (int iteration = 0; iteration < 12000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    bytes input;
    switch (iteration % 3) {
      case 0: {  // noise
        input.resize(random.uniform(256));
        for (auto& b : input) b = random_byte();
        break;
      }
      case 1: {  // a valid header around random envelope words
        const auto words = 1 + random.uniform(48);
        input = frame_around(std::vector<std::uint64_t>(words));
        for (std::size_t i = frame_header_bytes; i < input.size(); ++i) input[i] = random_byte();
        if (random.chance(1, 2)) put_le(input, frame_header_bytes, random.uniform(3), 4);
        if (random.chance(1, 2)) put_le(input, frame_header_bytes + 4, words - 1, 4);
        break;
      }
      default: {  // a real frame with a few bytes flipped
        input = originals[random.uniform(originals.size())];
        const auto flips = 1 + random.uniform(8);
        for (std::uint64_t f = 0; f < flips; ++f)
          input[random.uniform(input.size())] ^= std::byte{1} << random.uniform(8);
        break;
      }
    }
    auto decoded = decode_vector(input);
    if (!decoded.ok()) {
      REQUIRE(decoded.code() == errc::protocol);
      continue;
    }
    ++decoded_count;
    auto flat = flatten(encode(decoded->env, decoded->payload));
    frame_limits roomy{~std::uint64_t{0}, ~std::uint64_t{0}};
    auto again = decode_bytes(std::span<const std::byte>{flat.data(), flat.size()}, roomy);
    REQUIRE(again.ok());
    CHECK(again->env.body.index() == decoded->env.body.index());
  }
  // Some mutations must survive decoding, or the re-encode path is untested.
  CHECK(decoded_count > 100);
}

TEST_CASE("wire: body_name names every kind as logs show it") {
  CHECK(body_name(rpc{rpc_call{}}) == "rpc_call");
  CHECK(body_name(rpc{rpc_serve{}}) == "rpc_serve");
  CHECK(body_name(rpc{rpc_release{}}) == "rpc_release");
  CHECK(body_name(hello{}) == "hello");
  CHECK(body_name(error_reply{}) == "error_reply");
  CHECK(body_name(ok_reply{}) == "ok_reply");
  CHECK(body_name(register_owner{}) == "register_owner");
  CHECK(body_name(register_owner_reply{}) == "register_owner_reply");
  CHECK(body_name(heartbeat{}) == "heartbeat");
  CHECK(body_name(heartbeat_reply{}) == "heartbeat_reply");
  CHECK(body_name(place{}) == "place");
  CHECK(body_name(place_reply{}) == "place_reply");
  CHECK(body_name(commit{}) == "commit");
  CHECK(body_name(abort_put{}) == "abort_put");
  CHECK(body_name(locate{}) == "locate");
  CHECK(body_name(locate_reply{}) == "locate_reply");
  CHECK(body_name(remove_key{}) == "remove_key");
  CHECK(body_name(remove_key_reply{}) == "remove_key_reply");
  CHECK(body_name(drop{}) == "drop");
  CHECK(body_name(fetch{}) == "fetch");
  CHECK(body_name(fetch_reply{}) == "fetch_reply");
  CHECK(body_name(store{}) == "store");
  CHECK(body_name(kv_put{}) == "kv_put");
  CHECK(body_name(kv_put_reply{}) == "kv_put_reply");
  CHECK(body_name(kv_get{}) == "kv_get");
  CHECK(body_name(kv_get_reply{}) == "kv_get_reply");
  CHECK(body_name(kv_remove{}) == "kv_remove");
  CHECK(body_name(kv_remove_reply{}) == "kv_remove_reply");
  CHECK(body_name(kv_exists{}) == "kv_exists");
  CHECK(body_name(kv_exists_reply{}) == "kv_exists_reply");
  CHECK(body_name(wire::cluster_status{}) == "cluster_status");
  CHECK(body_name(cluster_status_reply{}) == "cluster_status_reply");
  CHECK(body_name(ping{}) == "ping");
  CHECK(body_name(leave{}) == "leave");
  CHECK(body_name(kv_commit{}) == "kv_commit");
  CHECK(body_name(list_keys{}) == "list_keys");
  CHECK(body_name(list_keys_reply{}) == "list_keys_reply");
  CHECK(body_name(count_keys{}) == "count_keys");
  CHECK(body_name(count_keys_reply{}) == "count_keys_reply");
  CHECK(body_name(evict{}) == "evict");
  CHECK(body_name(evict_reply{}) == "evict_reply");
  CHECK(body_name(pin{}) == "pin");
  CHECK(body_name(fetch_range{}) == "fetch_range");
  CHECK(body_name(rdma_lease{}) == "rdma_lease");
  CHECK(body_name(unpin_reply{}) == "unpin_reply");
}

TEST_CASE("wire: body_name names an mq message by its inner kind") {
  CHECK(body_name(mq{mq_create_topic{}}) == "mq_create_topic");
  CHECK(body_name(mq{mq_topics{}}) == "mq_topics");
  CHECK(body_name(mq{mq_produce{}}) == "mq_produce");
  CHECK(body_name(mq{mq_produced{}}) == "mq_produced");
  CHECK(body_name(mq{mq_join{}}) == "mq_join");
  CHECK(body_name(mq{mq_poll{}}) == "mq_poll");
  CHECK(body_name(mq{mq_polled{}}) == "mq_polled");
  CHECK(body_name(mq{mq_settle{}}) == "mq_settle");
  CHECK(body_name(mq{mq_seek{}}) == "mq_seek");
  CHECK(body_name(mq{mq_group_status_reply{}}) == "mq_group_status_reply");
  CHECK(body_name(mq{mq_delete_group{}}) == "mq_delete_group");
  CHECK(body_name(mq{mq_prefetch{}}) == "mq_prefetch");
  // Every kind has its own name.
  std::set<std::string_view> names;
  for (const auto& b : sample_mq_bodies()) names.insert(body_name(b));
  CHECK(names.size() == std::variant_size_v<mq_body>);
}

TEST_CASE("wire: an mq enum value out of its pinned range is a malformed frame") {
  auto bad_topic = topic_config;
  bad_topic.full = static_cast<mq_full>(3);
  auto bad_group = group_config;
  bad_group.start = static_cast<mq_start_at>(2);
  const std::vector<body> samples = {
      mq{mq_create_topic{"orders", bad_topic}},
      mq{mq_topics{{{"a", topic_config, {}}, {"b", bad_topic, {{1, 2, 3}}}}}},
      mq{mq_join{"workers", 0xb2, bad_group, 10'000}},
      mq{mq_settle{"workers", 0xb2, static_cast<mq_settle_kind>(3), {"orders", 2}, 41, 7, 0}},
      mq{mq_settle{"workers", 0xb2, static_cast<mq_settle_kind>(0xff), {"orders", 2}, 41, 7, 0}},
      mq{mq_poll{"workers", 0xb2, 16, 0, 100, 2, 1,
                 {{"", 0, mq_settle_kind::ack, {"orders", 2}, 41, 7, 0, 0},
                  {"", 0, static_cast<mq_settle_kind>(3), {"orders", 2}, 42, 7, 0, 0}}}},
  };
  for (const auto& b : samples) {
    CAPTURE(body_name(b));
    auto decoded = decode_vector(frame_bytes(sample_envelope(b)));
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.code() == errc::protocol);
    CHECK(decoded.error().message().find("unknown") != std::string::npos);
  }
}

TEST_CASE("wire: a poll carrying more settles than its bound is a malformed frame") {
  mq_poll p{"workers", 0xb2, 16, 0, 100, 2, 1, {}};
  p.settles.assign(mq_poll_settles_max, mq_settle{"", 0, mq_settle_kind::ack, {"orders", 0}, 1, 1, 0, 0});
  auto at_bound = decode_vector(frame_bytes(sample_envelope(mq{p})));
  REQUIRE(at_bound.ok());
  p.settles.push_back(p.settles.back());
  auto over = decode_vector(frame_bytes(sample_envelope(mq{p})));
  REQUIRE_FALSE(over.ok());
  CHECK(over.code() == errc::protocol);
  CHECK(over.error().message().find("settles") != std::string::npos);
}

TEST_CASE("wire: an mq message kind from a newer protocol is rejected") {
  // deleteTopic and deleteGroup are both Text members of Mq: their frames
  // differ only in Mq's union tag, which this test overwrites.
  auto topic_frame = frame_bytes(sample_envelope(mq{mq_delete_topic{"x"}}));
  auto group_frame = frame_bytes(sample_envelope(mq{mq_delete_group{"x"}}));
  REQUIRE(topic_frame.size() == group_frame.size());
  std::vector<std::size_t> differ;
  for (std::size_t i = 0; i < topic_frame.size(); ++i) {
    if (topic_frame[i] != group_frame[i]) differ.push_back(i);
  }
  REQUIRE(differ.size() == 1);
  put_le(topic_frame, differ[0], 0x1234, 2);
  auto decoded = decode_vector(topic_frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.code() == errc::protocol);
  CHECK(decoded.error().message().find("unknown mq message kind") != std::string::npos);
}

TEST_CASE("wire: an mq produce result with an error code this build does not know decodes as internal") {
  auto code = static_cast<errc>(static_cast<std::uint16_t>(errc_last) + 1);
  auto decoded = decode_vector(frame_bytes(sample_envelope(mq{mq_produced{{{code, "from the future", 1, 2, false}}}})));
  REQUIRE(decoded.ok());
  auto& results = std::get<mq_produced>(std::get<mq>(decoded->env.body).body).results;
  REQUIRE(results.size() == 1);
  CHECK(results[0].code == errc::internal);
  CHECK(results[0].message == "from the future");
}
