// mq_workload: producers and consumer groups over the real client, owner
// and master actors, under the run's faults, every delivery judged by
// mq_checker (docs/simulator.md, "MQ").
//
// Requests take the path the library's sluice::mq takes (api/src/mq.cpp):
// each goes to the client actor as an api_call, its owner stamps the
// member's session and passes it to the master. A produce writes its
// payload as an object under `~mq/<topic>/` (a KV put with the topic's
// payload replicas), then appends a shell naming it; a failed produce is
// retried with the same message id, so the master's dedupe window keeps
// retries from appending twice. Payload bytes follow from (producer,
// message id), so a consumer checks every byte it reads.
//
// Every client produces, and is a member of both groups; each membership
// comes and goes at seeded times — it leaves, or "crashes": it stops
// polling and acking and its lease lapses. A member polls (long polls),
// reads each payload with a KV get, then acks, nacks or ignores each
// delivery (its ack deadline passes). After the faulty phase members stay
// in and ack everything, and every acknowledged produce must reach every
// group.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/checker.hpp"
#include "sim/mq_checker.hpp"
#include "sim/world.hpp"

namespace sluice::sim {

struct mq_workload_options {
  /// Mean pause between two produces of one client.
  sim_duration produce_think = 100ms;
  /// Attempts of one produce (the same message id each time).
  int produce_attempts_max = 3;
  /// Deadline of each request (a poll's adds its wait).
  sim_duration timeout = 2s;
  /// How long a poll waits at the master for messages.
  sim_duration poll_wait = 300ms;
  /// A member's lease and ack timeout: short, so lapses and redeliveries
  /// happen within a run.
  sim_duration lease = 1500ms;
  sim_duration ack_timeout = 1s;
  /// How often one client lists the topics to check their bounds.
  sim_duration list_every = 500ms;
};

class mq_workload {
 public:
  mq_workload(world& w, checker& c, mq_workload_options options = {});

  /// Schedules producers and members; produces and membership changes
  /// stop at `stop`, members poll and ack until drained.
  void start(sim_time stop);
  /// After the faults healed (the KV liveness check heals the world): runs
  /// `window` more for the members to drain the topics, then checks that
  /// every acknowledged produce reached every group; then, once the
  /// master's orphan grace passed, that it holds no payload no shell names.
  void check_drained(sim_duration window);

  const mq_checker::counts& stats() const noexcept { return checker_.stats(); }

 private:
  struct member {
    int client = 0;
    int group = 0;
    std::uint64_t incarnation = 0;
    std::uint64_t phase = 0;  ///< grows when it goes in or out: older callbacks are stale
    bool in = false;
    bool joined = false;
    bool polling = false;
    bool poll_scheduled = false;  ///< one poll timer at most per member
    std::uint64_t polls = 0;      ///< polls sent (wire::mq_poll::poll_seq)
    std::uint64_t answered = 0;   ///< the last of them answered
    /// Acks that go with the member's next poll (wire::mq_poll::settles),
    /// each with the phase it was made in; at most mq_poll_settles_max.
    std::vector<std::pair<wire::mq_settle, std::uint64_t>> riding;
  };
  struct producer {
    std::uint64_t incarnation = 0;
    bool busy = false;
    std::uint64_t next_id = 1;  ///< kept across restarts: retries dedupe
  };
  /// One produce, retried with the same message.
  struct produce_job {
    int client = 0;
    std::uint64_t incarnation = 0;
    int topic = 0;
    mq_message_id message;
    int attempt = 0;
    sim_time started{};
    mq_epochs epochs;
  };
  using done_fn = std::function<void(result<wire::message>)>;

  void send(int client, wire::body request, shared_bytes payload, sim_duration timeout, done_fn done);
  bool current(int client, std::uint64_t incarnation) const;
  producer& producer_of(int client);
  member& member_of(int client, int group) { return members_[static_cast<std::size_t>(client * 2 + group)]; }
  mq_epochs epochs_now() const;
  void answered(mq_epochs& e) const;

  void create_topics(int client);
  void produce_tick(int client);
  void produce_attempt(produce_job job);
  void produce_append(produce_job job, std::string key);
  void produce_failed(produce_job job, const std::string& key, const error& e);

  void toggle(int client, int group);
  void poll_soon(int client, int group, sim_duration after);
  void join(int client, int group);
  void poll(int client, int group);
  void polled(member& m, std::uint64_t phase, const mq_poll_record& record, wire::mq_polled p);
  void settle(int client, int group, std::uint64_t phase, wire::mq_delivery d);
  void seek_start(int client, int group);
  void list_tick();
  void check_freed();
  bool stale(const member& m, std::uint64_t incarnation, std::uint64_t phase) const;

  world& world_;
  mq_checker checker_;
  mq_workload_options options_;
  std::vector<producer> producers_;
  std::vector<member> members_;
  sim_time stop_{};
  /// Members stop polling once the drain ended.
  bool ended_ = false;
  std::uint64_t next_payload_ = 1;
};

}  // namespace sluice::sim
