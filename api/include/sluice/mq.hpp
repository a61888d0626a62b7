// sluice/mq.hpp: topics of large payloads handed from producers to
// consumer groups (docs/mq.md). A payload is written once into the pool of
// the producer's owner; the master keeps only the message's shell (where
// the payload is, its size, offset and producer) and the groups' offsets.
//
//   sluice::mq queue{**c};
//   queue.create_topic("frames", {.partitions = 4});
//   auto at = queue.produce("frames", bytes);            // committed: at->partition, at->offset
//
//   auto consumer = queue.subscribe("decoders", {"frames"});
//   auto batch = consumer->poll({.max_messages = 8, .wait = std::chrono::seconds{1}});
//   for (auto& m : *batch) {
//     // m.payload->bytes() is a view into the pool
//     consumer->ack(m);
//   }
//
// Delivery is at-least-once: a message goes out again after a nack, when
// its ack deadline passes, or when the member holding it leaves or its
// lease lapses. Order is kept per partition.
//
// Thread safety: an mq and a consumer may each be used from many threads
// at once (a consumer's poll in one thread, its acks from others).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/result.hpp"
#include "sluice/value.hpp"

namespace sluice {

class dict_builder;

/// What a produce to a full partition does.
enum class full_policy : std::uint8_t {
  block = 0,        ///< the producer waits for room (acks free it) until its deadline, then gets `overloaded`
  reject = 1,       ///< the producer gets `overloaded` at once
  drop_oldest = 2,  ///< the oldest messages go, consumed or not, to make room
};

struct topic_options {
  /// 1 to 256. Order is kept per partition; a group reads its partitions
  /// with as many members in parallel.
  std::uint32_t partitions = 1;
  /// Retention, per partition: a message goes when every group acked
  /// past it, or when one of these limits says so (0: no limit).
  std::chrono::milliseconds max_age{0};
  std::uint64_t max_bytes = 0;
  std::uint64_t max_messages = 0;
  full_policy when_full = full_policy::block;
  /// Copies of each payload on distinct owners (1 to 8): with 2, a
  /// message survives the loss of one owner.
  std::uint32_t payload_replicas = 1;
  /// The largest message the topic takes (at most max_bytes, when set).
  std::uint64_t max_message_bytes = std::uint64_t{64} << 20;
  /// A (producer, message id) produced again within this window is not
  /// appended twice (0: no dedupe); `dedupe_entries` ids are remembered
  /// at most (0: 4096).
  std::chrono::milliseconds dedupe_window{0};
  std::uint64_t dedupe_entries = 0;
  /// Where a message goes that ran out of deliveries in some group
  /// (consumer_options::max_deliveries): a topic appended with the same
  /// payload (no copy), its message id naming where it came from. Empty:
  /// such a message is dropped. The topic need not exist yet; while it
  /// does not, or is full, such messages are dropped (the master logs it).
  std::string dead_letter{};
  /// This call's deadline; 0 means the client's default.
  std::chrono::milliseconds timeout{0};
};

struct partition_info {
  std::uint64_t start = 0;  ///< the lowest offset still held
  std::uint64_t end = 0;    ///< the offset the next message gets
  std::uint64_t bytes = 0;  ///< of the messages held
};

struct topic_info {
  std::string name;
  topic_options options;
  std::vector<partition_info> partitions;
};

struct produce_options {
  /// Messages with the same key go to the same partition (empty:
  /// round-robin over the partitions).
  std::string key{};
  /// Names the message for dedupe (see topic_options::dedupe_window).
  std::string message_id{};
  /// Wins over `key`.
  std::optional<std::uint32_t> partition{};
  /// This call's deadline, waiting for room included; 0: the client's default.
  std::chrono::milliseconds timeout{0};
};

/// One message of mq::produce_batch: its bytes (borrowed until the call
/// returns) and what produce_options would say of it.
struct mq_item {
  std::span<const std::byte> bytes{};
  std::string key{};
  std::string message_id{};
  std::optional<std::uint32_t> partition{};
};

/// Room in the pool for one message, written in place and then produced
/// with mq::produce(mq_writable&&, ...): on the owner's host bytes() is
/// the pool memory the payload lives in, so the message is never copied.
/// Destroying it unproduced gives the room back.
class mq_writable {
 public:
  mq_writable(mq_writable&&) noexcept = default;
  mq_writable& operator=(mq_writable&&) noexcept = default;

  /// Where to write the message; exactly the size reserved.
  std::span<std::byte> bytes() const noexcept { return value_.bytes(); }
  const std::string& topic() const noexcept { return topic_; }

 private:
  friend class mq;
  mq_writable(std::string topic, std::string payload_key, writable_value value)
      : topic_(std::move(topic)), payload_key_(std::move(payload_key)), value_(std::move(value)) {}
  std::string topic_;
  std::string payload_key_;
  writable_value value_;
};

/// Where a produced message was committed.
struct produced {
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  /// The dedupe window had this message id: nothing was appended, and
  /// (partition, offset) are the first produce's.
  bool duplicate = false;
};

struct consumer_options {
  /// A delivery not acked by then goes out again.
  std::chrono::milliseconds ack_timeout{30'000};
  /// Deliveries of one message at most; one more unacked and it is dead:
  /// acked for this group and handed to the topic's dead-letter topic
  /// (topic_options::dead_letter), or dropped when it has none.
  std::uint32_t max_deliveries = 5;
  /// Deliveries one member holds unacked at most.
  std::uint32_t prefetch = 16;
  /// A new group starts at the end of each partition rather than its start.
  bool from_latest = false;
  /// The member's lease: a member that does not poll for this long is
  /// dropped and its partitions and unacked messages go to the others.
  std::chrono::milliseconds lease{10'000};
  /// Deadline of each call other than poll; 0: the client's default.
  std::chrono::milliseconds timeout{0};
};

struct poll_options {
  std::size_t max_messages = 16;  ///< 1 to 1024
  std::uint64_t max_bytes = 0;    ///< 0: any; one larger message still comes alone
  /// How long to wait for a message when none is there (0: do not wait).
  std::chrono::milliseconds wait{1'000};
};

/// A delivered message.
struct mq_message {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::uint32_t delivery_count = 0;  ///< 1 the first time
  /// The payload, a view into the pool — or why it could not be read (a
  /// payload lost with the only owner that held it).
  result<value> payload = value{};
  /// Names this delivery in ack and nack.
  std::uint64_t generation = 0;
  /// The producer's message id (produce_options::message_id); in a
  /// dead-letter topic, where the message ran out of deliveries:
  /// "TOPIC/PARTITION/OFFSET@GROUP". Empty: none.
  std::string message_id{};
};

/// How far a group is behind on one partition.
struct partition_lag {
  std::string group;
  std::string topic;
  std::uint32_t partition = 0;
  std::string member;          ///< the member holding it ("": none)
  std::uint64_t committed = 0; ///< every offset below is acked
  std::uint64_t next = 0;      ///< the next offset delivered for the first time
  std::uint64_t in_flight = 0; ///< delivered, not acked
  std::uint64_t messages = 0;  ///< held and not acked
  std::uint64_t bytes = 0;
};

/// One member of a consumer group. Leaves the group when destroyed.
class mq_consumer {
 public:
  mq_consumer(mq_consumer&&) noexcept;
  mq_consumer& operator=(mq_consumer&&) noexcept;
  ~mq_consumer();

  /// Messages from the member's partitions: redeliveries first, then new
  /// ones, each partition in offset order. Waits up to options.wait when
  /// there are none; woken as soon as one is produced. Polling renews the
  /// member's lease. An empty batch means nothing came in time.
  result<std::vector<mq_message>> poll(const poll_options& options = {});
  /// Acks `done` (each as ack() would), then polls, in one request: one
  /// round trip for a batch's acks and the next batch. The acks are
  /// committed before the poll runs, so none of them comes back in its
  /// answer. The first ack refused (`conflict`, `not_found`, as ack()
  /// says) fails the call, which then polls nothing; the acks before it
  /// stand. At most 1024 messages (`invalid_argument` beyond).
  result<std::vector<mq_message>> ack_and_poll(std::span<const mq_message> done, const poll_options& options = {});
  /// The message is done with: it is never delivered to this group again.
  /// `conflict` when its partition moved to another member since (it will
  /// be delivered there), `not_found` when it is not held unacked.
  result<void> ack(const mq_message& message);
  /// Acks every message of the partition held by this member at or below `offset`.
  result<std::uint64_t> ack_upto(std::string_view topic, std::uint32_t partition, std::uint64_t offset);
  /// Gives the message back, to be delivered again after `delay`.
  result<void> nack(const mq_message& message, std::chrono::milliseconds delay = {});
  /// The group reads the partition from `offset` on next (replay or skip).
  result<void> seek(std::string_view topic, std::uint32_t partition, std::uint64_t offset);
  /// ... from the first message produced at or after `time` (ms since the Unix epoch).
  result<void> seek_time(std::string_view topic, std::uint32_t partition, std::int64_t time_ms);
  /// Leaves the group now: its partitions and unacked messages go to the
  /// other members.
  result<void> close();

  const std::string& group() const noexcept;

  struct impl;
  explicit mq_consumer(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

/// MQ through one client, which must outlive it. It produces as one
/// producer: `producer` names it for dedupe (the same name after a
/// restart dedupes retries of the old process); empty: a fresh id.
class mq {
 public:
  explicit mq(client& c, std::string_view producer = {});

  /// Creates a topic: true when created, false when it exists with the
  /// same options; `conflict` when it exists with others.
  result<bool> create_topic(std::string_view name, const topic_options& options = {});
  /// Deletes a topic with every message in it.
  result<void> delete_topic(std::string_view name, std::chrono::milliseconds timeout = {});
  /// Every topic, by name.
  result<std::vector<topic_info>> topics(std::chrono::milliseconds timeout = {});

  /// Writes `bytes` once into the pool and appends a message naming
  /// them; returns where it was committed. A full topic with policy block
  /// waits for room until the deadline (`overloaded` then).
  result<produced> produce(std::string_view topic, std::span<const std::byte> bytes,
                           const produce_options& options = {});
  result<produced> produce(std::string_view topic, std::string_view text, const produce_options& options = {});
  /// A dict (sluice/dict.hpp: scalars, byte buffers, tensors) as one
  /// message: each field's buffers are copied once, to their place in the pool.
  result<produced> produce(std::string_view topic, const dict_builder& dict, const produce_options& options = {});
  /// Room for a message of `size` bytes in `topic`, to write in place
  /// (see mq_writable); `invalid_argument` over the topic's largest message.
  result<mq_writable> reserve(std::string_view topic, std::uint64_t size, std::chrono::milliseconds timeout = {});
  /// Commits what was written into `message` and appends it.
  result<produced> produce(mq_writable&& message, const produce_options& options = {});
  /// Several messages to one topic: their payloads are put pipelined and
  /// appended with one request to the master per 1024 messages, in order.
  /// One result per item; `timeout` bounds the whole call.
  std::vector<result<produced>> produce_batch(std::string_view topic, std::span<const mq_item> items,
                                              std::chrono::milliseconds timeout = {});

  /// Joins `group` (created for `topics` if new) as a new member.
  result<mq_consumer> subscribe(std::string_view group, std::vector<std::string> topics,
                                const consumer_options& options = {});
  /// Lag per partition of `group`, or of every group when empty.
  result<std::vector<partition_lag>> lag(std::string_view group = {}, std::chrono::milliseconds timeout = {});
  /// Deletes a group and its offsets; its members' next calls fail.
  result<void> delete_group(std::string_view group, std::chrono::milliseconds timeout = {});

 private:
  struct topic_cache;
  /// What the topic takes (payload replicas, largest message), learned once.
  result<topic_options> config_of(std::string_view topic, std::chrono::milliseconds timeout);
  /// A fresh object key for one payload of `topic`.
  std::string payload_key(std::string_view topic) const;
  /// Appends messages whose payloads are committed; frees the payloads of
  /// those not appended. One result per message.
  std::vector<result<produced>> append(std::string_view topic, std::vector<std::string> keys,
                                       std::span<const mq_item> items, std::span<const std::uint64_t> sizes,
                                       std::chrono::milliseconds timeout);
  client* client_;
  std::uint64_t producer_;
  std::shared_ptr<topic_cache> topics_;  ///< what produce learned of each topic
};

}  // namespace sluice
