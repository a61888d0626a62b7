// redis_streams_mq: Redis Streams (Debian's redis-server and hiredis) as a
// peer in `bench/run mq`.
//
//   redis_streams_mq --port N [--seconds S]
//       4 KiB messages through one stream, the load of mq_load: the
//       producer sends XADD one at a time and waits for its reply (the
//       entry's id); the consumer, one member of a consumer group, takes
//       up to 64 entries with XREADGROUP (BLOCK 100), checks each, and
//       acks the batch with one XACK naming every id in it. Prints
//       redis_streams_4k_msgs_per_s and redis_streams_4k_errors.
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

reply_ptr command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data()));
  if (r == nullptr) std::fprintf(stderr, "redis_streams_mq: %s: %s\n", args[0].c_str(), c->errstr);
  if (r != nullptr && r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "redis_streams_mq: %s: %s\n", args[0].c_str(), r->str);
    freeReplyObject(r);
    r = nullptr;
  }
  return reply_ptr{r, &freeReplyObject};
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

/// One run through a fresh stream and group, deleted afterwards.
bool run_once(connection& producer, connection& consumer, const std::string& key, double seconds,
              std::uint64_t messages_max, mq_load::outcome& out) {
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
  calls.consume = [&](std::size_t max, const std::function<void(std::span<const std::byte>)>& seen) -> long {
    auto r = command(consumer.c, {"XREADGROUP", "GROUP", "g", "c", "COUNT", std::to_string(max), "BLOCK", block_ms,
                                  "STREAMS", key, ">"});
    if (!r) return -1;
    std::vector<std::string> ack{"XACK", key, "g"};
    std::vector<std::string> ids;
    if (!entries_of(r.get(), ids, seen)) {
      std::fputs("redis_streams_mq: XREADGROUP: an unexpected reply\n", stderr);
      return -1;
    }
    if (ids.empty()) return 0;
    ack.insert(ack.end(), ids.begin(), ids.end());
    auto acked = command(consumer.c, ack);
    if (!acked || acked->type != REDIS_REPLY_INTEGER || acked->integer != static_cast<long long>(ids.size())) {
      return -1;
    }
    return static_cast<long>(ids.size());
  };
  out = mq_load::run(calls, message_bytes, seconds, messages_max);
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
  mq_load::outcome warm, got;
  if (!run_once(producer, consumer, "mq-bench-warm", std::min(seconds, warmup_seconds_max), warmup_messages, warm) ||
      !run_once(producer, consumer, "mq-bench-run", seconds, 0, got)) {
    return 1;
  }
  mq_load::print_run("redis streams 4k", got, message_bytes);
  auto failures = warm.bad + warm.errors + got.bad + got.errors;
  mq_load::print_figure("redis_streams_4k_msgs_per_s", got.messages_per_s(), "msgs/s");
  std::printf("figure redis_streams_4k_errors %llu count\n", static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}
