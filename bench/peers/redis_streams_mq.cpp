// redis_streams_mq: Redis Streams (Debian's redis-server and hiredis) as a
// peer in `bench/run mq`.
//
//   redis_streams_mq --port N [--seconds S]
//       4 KiB messages through one stream, the load of mq_load: the
//       producer sends XADD one at a time and waits for its reply (the
//       entry's id); the consumer, one member of a consumer group, takes
//       up to 64 entries with XREADGROUP (BLOCK 100), checks each, and
//       acks the batch with one XACK naming every id in it. Prints
//       redis_streams_4k_msgs_per_s and redis_streams_4k_errors. Then
//       the same load with each batch's XACK pipelined with the next
//       XREADGROUP (sent together, one round trip; the XACK runs first):
//       redis_streams_4k_ack_pipelined_msgs_per_s.
//
// Plain hiredis, one blocking connection per thread: nothing here tunes
// Redis either way.
#include <hiredis/hiredis.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/mq_load.hpp"

namespace {

constexpr std::size_t message_bytes = 4u << 10;
constexpr std::uint64_t warmup_messages = 2000;
constexpr double warmup_seconds_max = 1.0;

using reply_ptr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

/// Sends a command without waiting for its reply (pipelining).
bool append(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return redisAppendCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data()) == REDIS_OK;
}

/// The next reply of a pipeline; null (and a message) on an error.
reply_ptr next_reply(redisContext* c, const char* what) {
  void* raw = nullptr;
  if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
    std::fprintf(stderr, "redis_streams_mq: %s: %s\n", what, c->errstr);
    return reply_ptr{nullptr, &freeReplyObject};
  }
  auto* r = static_cast<redisReply*>(raw);
  if (r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "redis_streams_mq: %s: %s\n", what, r->str);
    freeReplyObject(r);
    return reply_ptr{nullptr, &freeReplyObject};
  }
  return reply_ptr{r, &freeReplyObject};
}

/// Sends a command and waits for its reply; null (and a message) on an error.
reply_ptr command(redisContext* c, const std::vector<std::string>& args) {
  if (!append(c, args)) {
    std::fprintf(stderr, "redis_streams_mq: %s: %s\n", args[0].c_str(), c->errstr);
    return reply_ptr{nullptr, &freeReplyObject};
  }
  return next_reply(c, args[0].c_str());
}

struct connection {
  redisContext* c = nullptr;
  ~connection() {
    if (c != nullptr) redisFree(c);
  }
  bool open(int port) {
    c = redisConnect("127.0.0.1", port);
    if (c == nullptr || c->err != 0) {
      std::fprintf(stderr, "redis_streams_mq: connect: %s\n", c != nullptr ? c->errstr : "out of memory");
      return false;
    }
    return true;
  }
};

/// Hands the entries of an XREADGROUP reply to `seen`; collects their ids.
/// Returns false when the reply does not have the stream reply's shape.
bool entries_of(const redisReply* r, std::vector<std::string>& ids,
                const std::function<void(std::span<const std::byte>)>& seen) {
  if (r->type == REDIS_REPLY_NIL) return true;  // BLOCK ran out: nothing new
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 1) return false;
  const redisReply* stream = r->element[0];
  if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) return false;
  const redisReply* entries = stream->element[1];
  if (entries->type != REDIS_REPLY_ARRAY) return false;
  for (std::size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) return false;
    const redisReply* fields = e->element[1];
    if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 2) return false;
    ids.emplace_back(e->element[0]->str, e->element[0]->len);
    seen({reinterpret_cast<const std::byte*>(fields->element[1]->str), fields->element[1]->len});
  }
  return true;
}

/// One run through a fresh stream and group, deleted afterwards. With
/// `pipelined`, a batch's XACK goes out with the next XREADGROUP.
bool run_once(connection& producer, connection& consumer, const std::string& key, double seconds,
              std::uint64_t messages_max, bool pipelined, mq_load::outcome& out) {
  if (!command(producer.c, {"DEL", key})) return false;  // a stream left by an interrupted run
  if (!command(producer.c, {"XGROUP", "CREATE", key, "g", "0", "MKSTREAM"})) return false;
  std::string staging(message_bytes, '\0');
  mq_load::system_calls calls;
  calls.produce = [&](std::uint64_t n) {
    mq_load::fill(std::as_writable_bytes(std::span{staging.data(), staging.size()}), n);
    auto r = command(producer.c, {"XADD", key, "*", "d", staging});
    return r && r->type == REDIS_REPLY_STRING;
  };
  const std::string block_ms = std::to_string(mq_load::batch_wait_ms);
  std::vector<std::string> unacked;  // pipelined: the last batch's ids, acked with the next read
  auto xack = [&](const std::vector<std::string>& ids) {
    std::vector<std::string> ack{"XACK", key, "g"};
    ack.insert(ack.end(), ids.begin(), ids.end());
    return ack;
  };
  auto acked_all = [](const reply_ptr& r, std::size_t n) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == static_cast<long long>(n);
  };
  calls.consume = [&](std::size_t max, const std::function<void(std::span<const std::byte>)>& seen) -> long {
    std::vector<std::string> read{"XREADGROUP", "GROUP", "g", "c", "COUNT", std::to_string(max), "BLOCK", block_ms,
                                  "STREAMS", key, ">"};
    if (pipelined) {
      bool acking = !unacked.empty();
      if ((acking && !append(consumer.c, xack(unacked))) || !append(consumer.c, read)) return -1;
      if (acking && !acked_all(next_reply(consumer.c, "XACK"), unacked.size())) return -1;
      unacked.clear();
      auto r = next_reply(consumer.c, "XREADGROUP");
      if (!r || !entries_of(r.get(), unacked, seen)) return -1;
      return static_cast<long>(unacked.size());
    }
    auto r = command(consumer.c, read);
    if (!r) return -1;
    std::vector<std::string> ack{"XACK", key, "g"};
    std::vector<std::string> ids;
    if (!entries_of(r.get(), ids, seen)) {
      std::fputs("redis_streams_mq: XREADGROUP: an unexpected reply\n", stderr);
      return -1;
    }
    if (ids.empty()) return 0;
    ack.insert(ack.end(), ids.begin(), ids.end());
    if (!acked_all(command(consumer.c, ack), ids.size())) return -1;
    return static_cast<long>(ids.size());
  };
  out = mq_load::run(calls, message_bytes, seconds, messages_max);
  if (!unacked.empty() && !acked_all(command(consumer.c, xack(unacked)), unacked.size())) ++out.errors;
  if (!command(producer.c, {"DEL", key})) ++out.errors;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string{argv[i]} == "--port") port = std::atoi(argv[i + 1]);
  }
  if (port <= 0) {
    std::fputs("usage: redis_streams_mq --port N [--seconds S]\n", stderr);
    return 2;
  }
  double seconds = mq_load::seconds_arg(argc, argv, 2.0);
  connection producer, consumer;
  if (!producer.open(port) || !consumer.open(port)) return 1;
  mq_load::outcome warm, got, piped_warm, piped;
  auto warmup = std::min(seconds, warmup_seconds_max);
  if (!run_once(producer, consumer, "mq-bench-warm", warmup, warmup_messages, false, warm) ||
      !run_once(producer, consumer, "mq-bench-run", seconds, 0, false, got) ||
      !run_once(producer, consumer, "mq-bench-warm-piped", warmup, warmup_messages, true, piped_warm) ||
      !run_once(producer, consumer, "mq-bench-run-piped", seconds, 0, true, piped)) {
    return 1;
  }
  mq_load::print_run("redis streams 4k", got, message_bytes);
  mq_load::print_run("redis streams 4k, XACK pipelined with the next read", piped, message_bytes);
  auto failures = warm.bad + warm.errors + got.bad + got.errors + piped_warm.bad + piped_warm.errors + piped.bad +
                  piped.errors;
  mq_load::print_figure("redis_streams_4k_msgs_per_s", got.messages_per_s(), "msgs/s");
  mq_load::print_figure("redis_streams_4k_ack_pipelined_msgs_per_s", piped.messages_per_s(), "msgs/s");
  std::printf("figure redis_streams_4k_errors %llu count\n", static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}
