#include "sim/workload.hpp"

#include <caf/send.hpp>

#include <fmt/format.h>

#include "actors/client/client.hpp"

namespace sluice::sim {
namespace {

constexpr std::size_t body_sizes[] = {0, 0, 16, 100, 1000, 4096, 10'000, 100'000};

}  // namespace

kv_workload::kv_workload(world& w, checker& c, workload_options options)
    : world_(w), checker_(c), options_(options), clients_(static_cast<std::size_t>(w.config().clients)) {}

bool kv_workload::current(int client, std::uint64_t incarnation) const {
  auto node = world_.client_index(client);
  return world_.alive(node) && world_.incarnation(node) == incarnation;
}

void kv_workload::run_until(sim_time stop) {
  stop_ = stop;
  for (int c = 0; c < static_cast<int>(clients_.size()); ++c) {
    keep(c);
    schedule_next(c);
  }
  world_.run_until(stop);
}

std::string kv_workload::kept_key(int client) { return fmt::format("keep/c{}", client); }

void kv_workload::keep(int client) {
  if (world_.now() >= stop_) return;
  auto retry = [this, client] { world_.at(world_.now() + 500ms, [this, client] { keep(client); }); };
  auto node = world_.client_index(client);
  if (!world_.alive(node)) return retry();
  auto inc = world_.incarnation(node);
  auto key = kept_key(client);
  put_id id{static_cast<std::uint32_t>(client), clients_[static_cast<std::size_t>(client)].next_seq++};
  checker_.put_started(key, id, world_.now(), sim_duration::zero(), 2);
  send(client, wire::kv_put{key, {}, 0, 2, ""}, make_value(key, id, 1000),
       [this, client, inc, key, id, retry](result<wire::message> reply) {
         if (!current(client, inc)) return retry();
         auto r = reply_body<wire::kv_put_reply>(reply);
         checker_.put_ended(key, id, world_.now(), r ? result<std::uint64_t>{r->version} : result<std::uint64_t>{r.error()});
         if (!r) retry();
       });
}

void kv_workload::schedule_next(int client) {
  auto mean = static_cast<std::uint64_t>(options_.think.count());
  auto pause = sim_duration{static_cast<sim_duration::rep>(world_.workload_rng().uniform(2 * mean + 1))};
  auto when = world_.now() + pause;
  if (when >= stop_) return;
  world_.at(when, [this, client] {
    issue(client);
    schedule_next(client);
  });
}

void kv_workload::send(int client, wire::body request, shared_bytes payload,
                       std::function<void(result<wire::message>)> done) {
  api_call call;
  call.request = std::move(request);
  call.payload = std::move(payload);
  call.timeout = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
  call.done = std::move(done);
  caf::anon_send(world_.actor_of(world_.client_index(client)), api_atom::value, std::move(call));
}

void kv_workload::issue(int client) {
  auto node = world_.client_index(client);
  if (!world_.alive(node)) return;
  auto& st = clients_[static_cast<std::size_t>(client)];
  auto inc = world_.incarnation(node);
  if (st.incarnation != inc) st = client_state{inc, 0, st.next_seq};  // it restarted: nothing in flight
  if (st.outstanding >= options_.outstanding_max) return;
  auto& random = world_.workload_rng();
  auto roll = random.uniform(100);
  // Half the operations touch keys one client writes: it puts and removes
  // its own, anyone reads them — so owners commit puts themselves and
  // others read what they committed. The rest share keys among all.
  std::string key;
  if (random.uniform(2) == 0) {
    bool writes = roll < 35 || (roll >= 80 && roll < 90);
    auto writer = writes ? static_cast<std::uint64_t>(client) : random.uniform(clients_.size());
    key = fmt::format("c{}/k{}", writer, random.uniform(static_cast<std::uint64_t>(options_.own_keys)));
  } else {
    key = fmt::format("k{:02}", random.uniform(static_cast<std::uint64_t>(options_.keys)));
  }
  auto start = world_.now();
  st.outstanding += 1;
  ++issued_;
  auto finish = [this, client, inc] {
    if (current(client, inc)) clients_[static_cast<std::size_t>(client)].outstanding -= 1;
  };
  if (roll < 35) {
    put_id id{static_cast<std::uint32_t>(client), st.next_seq++};
    auto body = body_sizes[random.uniform(std::size(body_sizes))];
    // A third of the puts keep two copies (with one owner they fail:
    // unavailable); a quarter expire after a while.
    std::uint32_t copies = random.uniform(3) == 0 ? 2 : 1;
    constexpr std::uint64_t ttls_ms[] = {200, 1000, 5000};
    std::uint64_t ttl_ms = random.uniform(4) == 0 ? ttls_ms[random.uniform(std::size(ttls_ms))] : 0;
    checker_.put_started(key, id, start, std::chrono::milliseconds{ttl_ms}, copies);
    send(client, wire::kv_put{key, {}, ttl_ms, copies, ""}, make_value(key, id, body),
         [this, client, inc, key, id, finish](result<wire::message> reply) {
           if (!current(client, inc)) return;
           auto r = reply_body<wire::kv_put_reply>(reply);
           checker_.put_ended(key, id, world_.now(),
                              r ? result<std::uint64_t>{r->version} : result<std::uint64_t>{r.error()});
           finish();
         });
  } else if (roll < 80) {
    // One get in eight reads a key kept since the start.
    if (random.uniform(8) == 0) key = kept_key(static_cast<int>(random.uniform(clients_.size())));
    send(client, wire::kv_get{key}, {}, [this, client, inc, key, start, finish](result<wire::message> reply) {
      if (!current(client, inc)) return;
      auto r = reply_body<wire::kv_get_reply>(reply);
      using found = std::pair<std::uint64_t, shared_bytes>;
      checker_.get_ended(key, start, world_.now(),
                         r ? result<found>{found{r->version, reply->payload}} : result<found>{r.error()});
      finish();
    });
  } else if (roll < 90) {
    auto index = checker_.remove_started(key, start);
    send(client, wire::kv_remove{key, 0}, {}, [this, client, inc, key, index, finish](result<wire::message> reply) {
      if (!current(client, inc)) return;
      auto r = reply_body<wire::kv_remove_reply>(reply);
      checker_.remove_ended(key, index, world_.now(), r ? result<bool>{r->existed} : result<bool>{r.error()});
      finish();
    });
  } else {
    send(client, wire::kv_exists{key}, {}, [this, client, inc, key, start, finish](result<wire::message> reply) {
      if (!current(client, inc)) return;
      auto r = reply_body<wire::kv_exists_reply>(reply);
      checker_.exists_ended(key, start, world_.now(), r ? result<bool>{r->exists} : result<bool>{r.error()});
      finish();
    });
  }
}

void kv_workload::live_attempt(int client, sim_time deadline, std::vector<int>& done) {
  if (world_.now() >= deadline) return;
  auto retry = [this, client, deadline, &done] {
    world_.at(world_.now() + 500ms, [this, client, deadline, &done] { live_attempt(client, deadline, done); });
  };
  auto node = world_.client_index(client);
  auto inc = world_.incarnation(node);
  auto key = fmt::format("live/{}/{}", client, inc);
  put_id id{static_cast<std::uint32_t>(client), clients_[static_cast<std::size_t>(client)].next_seq++};
  checker_.put_started(key, id, world_.now());
  send(client, wire::kv_put{key, {}, 0, 1, ""}, make_value(key, id, 64),
       [this, client, inc, key, id, retry, &done](result<wire::message> reply) {
         if (!current(client, inc)) return;
         auto put = reply_body<wire::kv_put_reply>(reply);
         checker_.put_ended(key, id, world_.now(),
                            put ? result<std::uint64_t>{put->version} : result<std::uint64_t>{put.error()});
         if (!put) return retry();
         auto start = world_.now();
         send(client, wire::kv_get{key}, {}, [this, client, inc, key, start, retry, &done](result<wire::message> reply) {
           if (!current(client, inc)) return;
           auto got = reply_body<wire::kv_get_reply>(reply);
           using found = std::pair<std::uint64_t, shared_bytes>;
           checker_.get_ended(key, start, world_.now(),
                              got ? result<found>{found{got->version, reply->payload}} : result<found>{got.error()});
           if (!got) return retry();
           done.push_back(client);
         });
       });
}

std::vector<int> kv_workload::check_liveness(sim_duration settle, sim_duration window) {
  world_.heal();
  for (int i = 0; i < world_.node_count(); ++i) {
    if (!world_.alive(i)) world_.restart(i, false);
  }
  world_.run_until(world_.now() + settle);
  std::vector<int> done;
  auto deadline = world_.now() + window;
  for (int c = 0; c < static_cast<int>(clients_.size()); ++c) live_attempt(c, deadline, done);
  world_.run_until(deadline);
  std::vector<int> stuck;
  for (int c = 0; c < static_cast<int>(clients_.size()); ++c) {
    if (std::find(done.begin(), done.end(), c) == done.end()) stuck.push_back(c);
  }
  return stuck;
}

void kv_workload::durable_attempt(const std::string& key, int client, sim_time deadline,
                                  durable_reads& reads) {
  if (world_.now() >= deadline) return;
  auto node = world_.client_index(client);
  auto inc = world_.incarnation(node);
  auto start = world_.now();
  send(client, wire::kv_get{key}, {}, [this, key, client, inc, start, deadline, &reads](result<wire::message> reply) {
    if (!current(client, inc)) return;
    auto got = reply_body<wire::kv_get_reply>(reply);
    using found = std::pair<std::uint64_t, shared_bytes>;
    checker_.get_ended(key, start, world_.now(),
                       got ? result<found>{found{got->version, reply->payload}} : result<found>{got.error()});
    if (got || got.code() == errc::not_found) {
      reads.answered.insert(key);  // judged by the checker: found, or not_found with a reason
      return;
    }
    reads.last_error[key] = got.error().to_string();
    // Another client next time: the trouble may be this one's owner.
    auto next = (client + 1) % static_cast<int>(clients_.size());
    world_.at(world_.now() + 500ms, [this, key, next, deadline, &reads] {
      durable_attempt(key, next, deadline, reads);
    });
  });
}

void kv_workload::check_durable(sim_duration window) {
  auto keys = checker_.durable_keys(world_.now());
  durable_reads reads;
  auto deadline = world_.now() + window;
  int client = 0;
  for (auto& key : keys) {
    durable_attempt(key, client, deadline, reads);
    client = (client + 1) % static_cast<int>(clients_.size());
  }
  world_.run_until(deadline);
  durable_checked_ += keys.size();
  for (auto& key : keys) {
    if (reads.answered.contains(key)) continue;
    auto why = reads.last_error.find(key);
    checker_.violation(fmt::format("durability: '{}' was put with two copies and nothing could have lost it, "
                                   "but no get could read it within {:.0f}s after the faults healed ({})",
                                   key, seconds(window),
                                   why == reads.last_error.end() ? "no get answered" : "last: " + why->second));
  }
}

}  // namespace sluice::sim
