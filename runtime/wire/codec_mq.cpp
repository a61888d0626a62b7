// The codec's part for message queues: topics, producing, consumer groups,
// polling, settling, seeking and lag, and their answers.
#include "runtime/wire/codec_mq.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/codec_detail.hpp"

namespace sluice::wire {
namespace {

using namespace codec_detail;

// --- encoding ---------------------------------------------------------------

/// Text with its length: the std::string conversion stops at the first
/// NUL, which would let a name the master refuses pass as a shorter one.
capnp::Text::Reader as_text(const std::string& text) { return {text.data(), text.size()}; }

template <class List, class T, class F>
void set_list(List list, const std::vector<T>& xs, F set_one) {
  for (unsigned i = 0; i < xs.size(); ++i) set_one(list[i], xs[i]);
}

void set_topic_config(s::MqTopicConfig::Builder b, const mq_topic_config& x) {
  b.setPartitions(x.partitions);
  b.setMaxAgeMs(x.max_age_ms);
  b.setMaxBytes(x.max_bytes);
  b.setMaxMessages(x.max_messages);
  b.setFull(static_cast<std::uint8_t>(x.full));
  b.setPayloadReplicas(x.payload_replicas);
  b.setMaxMessageBytes(x.max_message_bytes);
  b.setDedupeWindowMs(x.dedupe_window_ms);
  b.setDedupeEntriesMax(x.dedupe_entries_max);
  b.setDeadLetter(as_text(x.dead_letter));
}

void set_partition_ref(s::MqPartitionRef::Builder b, const mq_partition_ref& x) {
  b.setTopic(as_text(x.topic));
  b.setPartition(x.partition);
}

void set_topic_info(s::MqTopicInfo::Builder b, const mq_topic_info& x) {
  b.setTopic(as_text(x.topic));
  set_topic_config(b.initConfig(), x.config);
  set_list(b.initPartitions(static_cast<unsigned>(x.partitions.size())), x.partitions,
           [](s::MqPartitionInfo::Builder p, const mq_partition_info& info) {
             p.setStart(info.start);
             p.setEnd(info.end);
             p.setBytes(info.bytes);
           });
}

void set_message(s::MqMessage::Builder b, const mq_message& x) {
  b.setPayload(as_data(x.payload));
  b.setSizeBytes(x.size_bytes);
  b.setMessageId(as_data(x.message_id));
  b.setKey(as_data(x.key));
  b.setHasPartition(x.has_partition);
  b.setPartition(x.partition);
}

void set_produced_one(s::MqProducedOne::Builder b, const mq_produced_one& x) {
  b.setCode(static_cast<std::uint16_t>(x.code));
  b.setMessage(as_text(x.message));
  b.setPartition(x.partition);
  b.setOffset(x.offset);
  b.setDuplicate(x.duplicate);
}

void set_group_config(s::MqGroupConfig::Builder b, const mq_group_config& x) {
  auto topics = b.initTopics(static_cast<unsigned>(x.topics.size()));
  for (unsigned i = 0; i < x.topics.size(); ++i) topics.set(i, as_text(x.topics[i]));
  b.setAckTimeoutMs(x.ack_timeout_ms);
  b.setMaxDeliveries(x.max_deliveries);
  b.setPrefetch(x.prefetch);
  b.setStart(static_cast<std::uint8_t>(x.start));
}

void set_delivery(s::MqDelivery::Builder b, const mq_delivery& x) {
  set_partition_ref(b.initPartition(), x.partition);
  b.setOffset(x.offset);
  b.setPayload(as_data(x.payload));
  b.setSizeBytes(x.size_bytes);
  b.setDeliveryCount(x.delivery_count);
  b.setGeneration(x.generation);
  b.setAckDeadlineMs(x.ack_deadline_ms);
  b.setMessageId(as_data(x.message_id));
}

void set_partition_lag(s::MqPartitionLag::Builder b, const mq_partition_lag& x) {
  b.setGroup(as_text(x.group));
  set_partition_ref(b.initPartition(), x.partition);
  b.setMember(x.member);
  b.setGeneration(x.generation);
  b.setCommitted(x.committed);
  b.setNext(x.next);
  b.setInFlight(x.in_flight);
  b.setLagMessages(x.lag_messages);
  b.setLagBytes(x.lag_bytes);
}

// One `put` per mq_body alternative: writes it as its member of the union.

void put(s::Mq::Builder b, const mq_create_topic& x) {
  auto c = b.initCreateTopic();
  c.setTopic(as_text(x.topic));
  set_topic_config(c.initConfig(), x.config);
}

void put(s::Mq::Builder b, const mq_topic_created& x) { b.setTopicCreated(x.created); }

void put(s::Mq::Builder b, const mq_delete_topic& x) { b.setDeleteTopic(as_text(x.topic)); }

void put(s::Mq::Builder b, const mq_list_topics&) { b.setListTopics(); }

void put(s::Mq::Builder b, const mq_topics& x) {
  set_list(b.initTopics(static_cast<unsigned>(x.topics.size())), x.topics, set_topic_info);
}

void put(s::Mq::Builder b, const mq_produce& x) {
  auto p = b.initProduce();
  p.setTopic(as_text(x.topic));
  p.setSession(x.session);
  set_list(p.initMessages(static_cast<unsigned>(x.messages.size())), x.messages, set_message);
}

void put(s::Mq::Builder b, const mq_produced& x) {
  set_list(b.initProduced(static_cast<unsigned>(x.results.size())), x.results, set_produced_one);
}

void put(s::Mq::Builder b, const mq_join& x) {
  auto j = b.initJoin();
  j.setGroup(as_text(x.group));
  j.setSession(x.session);
  set_group_config(j.initConfig(), x.config);
  j.setLeaseMs(x.lease_ms);
}

void put(s::Mq::Builder b, const mq_joined& x) {
  set_list(b.initJoined(static_cast<unsigned>(x.assigned.size())), x.assigned, set_partition_ref);
}

void put(s::Mq::Builder b, const mq_leave& x) {
  auto l = b.initLeave();
  l.setGroup(as_text(x.group));
  l.setSession(x.session);
}

void set_settle(s::MqSettle::Builder t, const mq_settle& x);

void put(s::Mq::Builder b, const mq_poll& x) {
  auto p = b.initPoll();
  p.setGroup(as_text(x.group));
  p.setSession(x.session);
  p.setMaxMessages(x.max_messages);
  p.setMaxBytes(x.max_bytes);
  p.setWaitMs(x.wait_ms);
  p.setPollSeq(x.poll_seq);
  p.setAnsweredSeq(x.answered_seq);
  set_list(p.initSettles(static_cast<unsigned>(x.settles.size())), x.settles, set_settle);
}

void put(s::Mq::Builder b, const mq_polled& x) {
  set_list(b.initPolled(static_cast<unsigned>(x.deliveries.size())), x.deliveries, set_delivery);
}

void set_settle(s::MqSettle::Builder t, const mq_settle& x) {
  t.setGroup(as_text(x.group));
  t.setSession(x.session);
  t.setKind(static_cast<std::uint8_t>(x.kind));
  set_partition_ref(t.initPartition(), x.partition);
  t.setOffset(x.offset);
  t.setGeneration(x.generation);
  t.setDelayMs(x.delay_ms);
  t.setAnsweredSeq(x.answered_seq);
}

void put(s::Mq::Builder b, const mq_settle& x) { set_settle(b.initSettle(), x); }

void put(s::Mq::Builder b, const mq_settled& x) { b.setSettled(x.count); }

void put(s::Mq::Builder b, const mq_seek& x) {
  auto k = b.initSeek();
  k.setGroup(as_text(x.group));
  set_partition_ref(k.initPartition(), x.partition);
  k.setByTime(x.by_time);
  k.setOffset(x.offset);
  k.setTimeMs(x.time_ms);
}

void put(s::Mq::Builder b, const mq_group_status& x) { b.setGroupStatus(as_text(x.group)); }

void put(s::Mq::Builder b, const mq_group_status_reply& x) {
  set_list(b.initGroupStatusReply(static_cast<unsigned>(x.partitions.size())), x.partitions, set_partition_lag);
}

void put(s::Mq::Builder b, const mq_delete_group& x) { b.setDeleteGroup(as_text(x.group)); }

void put(s::Mq::Builder b, const mq_prefetch& x) {
  auto p = b.initPrefetch();
  p.setPayload(as_data(x.payload));
  p.setVersion(x.version);
  p.setSize(x.size);
  set_list(p.initHolders(static_cast<unsigned>(x.holders.size())), x.holders, set_replica);
}

// --- decoding ---------------------------------------------------------------

/// An enum carried as UInt8: a value past `last` is a malformed frame, as
/// a peer of this build never sends one.
template <class E>
result<E> read_enum(std::uint8_t value, E last, std::string_view what) {
  if (value > static_cast<std::uint8_t>(last)) {
    return fail(errc::protocol, std::string{what} + " " + std::to_string(value));
  }
  return static_cast<E>(value);
}

template <class T, class List, class F>
std::vector<T> read_list(List list, F read_one) {
  std::vector<T> out;
  out.reserve(list.size());
  for (auto x : list) out.push_back(read_one(x));
  return out;
}

mq_partition_ref read_partition_ref(s::MqPartitionRef::Reader r) {
  return {from_text(r.getTopic()), r.getPartition()};
}

result<mq_topic_config> read_topic_config(s::MqTopicConfig::Reader r, std::string_view kind) {
  auto full = read_enum(r.getFull(), mq_full::drop_oldest, std::string{kind} + " with unknown full policy");
  if (!full) return std::move(full).error();
  return mq_topic_config{r.getPartitions(),      r.getMaxAgeMs(),       r.getMaxBytes(),
                         r.getMaxMessages(),     *full,                 r.getPayloadReplicas(),
                         r.getMaxMessageBytes(), r.getDedupeWindowMs(), r.getDedupeEntriesMax(),
                         from_text(r.getDeadLetter())};
}

result<mq_body> read_create_topic(s::MqCreateTopic::Reader r) {
  auto config = read_topic_config(r.getConfig(), "mq_create_topic");
  if (!config) return std::move(config).error();
  return mq_body{mq_create_topic{from_text(r.getTopic()), *config}};
}

result<mq_body> read_topics(capnp::List<s::MqTopicInfo>::Reader list) {
  mq_topics out;
  out.topics.reserve(list.size());
  for (auto t : list) {
    auto config = read_topic_config(t.getConfig(), "mq_topics");
    if (!config) return std::move(config).error();
    out.topics.push_back(mq_topic_info{
        from_text(t.getTopic()), *config, read_list<mq_partition_info>(t.getPartitions(), [](auto p) {
          return mq_partition_info{p.getStart(), p.getEnd(), p.getBytes()};
        })});
  }
  return mq_body{std::move(out)};
}

mq_message read_message(s::MqMessage::Reader m) {
  return {from_data(m.getPayload()), m.getSizeBytes(),     from_data(m.getMessageId()),
          from_data(m.getKey()),     m.getHasPartition(), m.getPartition()};
}

mq_body read_produce(s::MqProduce::Reader r) {
  return mq_produce{from_text(r.getTopic()), r.getSession(), read_list<mq_message>(r.getMessages(), read_message)};
}

mq_body read_produced(capnp::List<s::MqProducedOne>::Reader list) {
  // An unknown code reads as `internal` (errc_from_wire), as in ErrorReply;
  // 0 is a success here, not a malformed frame.
  return mq_produced{read_list<mq_produced_one>(list, [](auto p) {
    return mq_produced_one{errc_from_wire(p.getCode()), from_text(p.getMessage()), p.getPartition(), p.getOffset(),
                           p.getDuplicate()};
  })};
}

result<mq_body> read_join(s::MqJoin::Reader r) {
  auto c = r.getConfig();
  auto start = read_enum(c.getStart(), mq_start_at::latest, "mq_join with unknown start");
  if (!start) return std::move(start).error();
  mq_group_config config{read_list<std::string>(c.getTopics(), from_text), c.getAckTimeoutMs(),
                         c.getMaxDeliveries(), c.getPrefetch(), *start};
  return mq_body{mq_join{from_text(r.getGroup()), r.getSession(), std::move(config), r.getLeaseMs()}};
}

result<mq_settle> read_one_settle(s::MqSettle::Reader r) {
  auto kind = read_enum(r.getKind(), mq_settle_kind::nack, "mq_settle with unknown kind");
  if (!kind) return std::move(kind).error();
  return mq_settle{from_text(r.getGroup()), r.getSession(), *kind, read_partition_ref(r.getPartition()),
                   r.getOffset(), r.getGeneration(), r.getDelayMs(), r.getAnsweredSeq()};
}

result<mq_body> read_poll(s::MqPoll::Reader r) {
  mq_poll p{from_text(r.getGroup()), r.getSession(), r.getMaxMessages(), r.getMaxBytes(), r.getWaitMs(),
            r.getPollSeq(), r.getAnsweredSeq(), {}};
  auto settles = r.getSettles();
  if (settles.size() > mq_poll_settles_max) {
    return fail(errc::protocol, "mq_poll with " + std::to_string(settles.size()) + " settles; at most " +
                                    std::to_string(mq_poll_settles_max));
  }
  p.settles.reserve(settles.size());
  for (auto s : settles) {
    auto one = read_one_settle(s);
    if (!one) return std::move(one).error();
    p.settles.push_back(std::move(*one));
  }
  return mq_body{std::move(p)};
}

mq_body read_polled(capnp::List<s::MqDelivery>::Reader list) {
  return mq_polled{read_list<mq_delivery>(list, [](auto d) {
    return mq_delivery{read_partition_ref(d.getPartition()), d.getOffset(), from_data(d.getPayload()),
                       d.getSizeBytes(), d.getDeliveryCount(), d.getGeneration(), d.getAckDeadlineMs(),
                       from_data(d.getMessageId())};
  })};
}

result<mq_body> read_settle(s::MqSettle::Reader r) {
  auto one = read_one_settle(r);
  if (!one) return std::move(one).error();
  return mq_body{std::move(*one)};
}

mq_body read_seek(s::MqSeek::Reader r) {
  return mq_seek{from_text(r.getGroup()), read_partition_ref(r.getPartition()), r.getByTime(), r.getOffset(),
                 r.getTimeMs()};
}

mq_body read_group_status_reply(capnp::List<s::MqPartitionLag>::Reader list) {
  return mq_group_status_reply{read_list<mq_partition_lag>(list, [](auto l) {
    return mq_partition_lag{from_text(l.getGroup()), read_partition_ref(l.getPartition()), l.getMember(),
                            l.getGeneration(),       l.getCommitted(),                     l.getNext(),
                            l.getInFlight(),         l.getLagMessages(),                   l.getLagBytes()};
  })};
}

result<mq_body> read_member(s::Mq::Reader r) {
  using W = s::Mq::Which;
  switch (r.which()) {
    case W::CREATE_TOPIC: return read_create_topic(r.getCreateTopic());
    case W::TOPIC_CREATED: return mq_body{mq_topic_created{r.getTopicCreated()}};
    case W::DELETE_TOPIC: return mq_body{mq_delete_topic{from_text(r.getDeleteTopic())}};
    case W::LIST_TOPICS: return mq_body{mq_list_topics{}};
    case W::TOPICS: return read_topics(r.getTopics());
    case W::PRODUCE: return read_produce(r.getProduce());
    case W::PRODUCED: return read_produced(r.getProduced());
    case W::JOIN: return read_join(r.getJoin());
    case W::JOINED: return mq_body{mq_joined{read_list<mq_partition_ref>(r.getJoined(), read_partition_ref)}};
    case W::LEAVE: return mq_body{mq_leave{from_text(r.getLeave().getGroup()), r.getLeave().getSession()}};
    case W::POLL: return read_poll(r.getPoll());
    case W::POLLED: return read_polled(r.getPolled());
    case W::SETTLE: return read_settle(r.getSettle());
    case W::SETTLED: return mq_body{mq_settled{r.getSettled()}};
    case W::SEEK: return read_seek(r.getSeek());
    case W::GROUP_STATUS: return mq_body{mq_group_status{from_text(r.getGroupStatus())}};
    case W::GROUP_STATUS_REPLY: return read_group_status_reply(r.getGroupStatusReply());
    case W::DELETE_GROUP: return mq_body{mq_delete_group{from_text(r.getDeleteGroup())}};
    case W::PREFETCH: {
      auto p = r.getPrefetch();
      return mq_body{mq_prefetch{from_data(p.getPayload()), p.getVersion(), p.getSize(),
                                 read_list<replica>(p.getHolders(), read_replica)}};
    }
  }
  return fail(errc::protocol, "unknown mq message kind " + std::to_string(static_cast<unsigned>(r.which())) +
                                  " (the peer speaks a newer protocol?)");
}

}  // namespace

void write_mq(s::Mq::Builder b, const mq& msg) {
  std::visit([&b](const auto& x) { put(b, x); }, msg.body);
}

result<mq> read_mq(s::Mq::Reader r) {
  auto body = read_member(r);
  if (!body) return std::move(body).error();
  return mq{std::move(*body)};
}

std::string_view mq_body_name(const mq_body& b) noexcept {
  static constexpr std::string_view names[] = {
      "mq_create_topic", "mq_topic_created", "mq_delete_topic", "mq_list_topics", "mq_topics",
      "mq_produce",      "mq_produced",      "mq_join",         "mq_joined",      "mq_leave",
      "mq_poll",         "mq_polled",        "mq_settle",       "mq_settled",     "mq_seek",
      "mq_group_status", "mq_group_status_reply", "mq_delete_group", "mq_prefetch"};
  static_assert(std::size(names) == std::variant_size_v<mq_body>);
  return names[b.index()];
}

}  // namespace sluice::wire
