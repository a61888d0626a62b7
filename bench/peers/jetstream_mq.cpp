// jetstream_mq: NATS JetStream (Debian's nats-server and libnats C client)
// as a peer in `bench/run mq`.
//
//   jetstream_mq --port N [--seconds S]
//       4 KiB messages through a stream on memory storage, the load of
//       mq_load: the producer publishes one message at a time and waits
//       for its PubAck (js_Publish); the consumer, a durable pull
//       consumer (ack policy all), fetches up to 64 messages, checks
//       each, and acks the batch with one synchronous ack of its last
//       message (natsMsg_AckSync). Prints jetstream_4k_msgs_per_s and
//       jetstream_4k_errors.
//
// Plain library defaults otherwise: nothing here tunes NATS either way.
#include <nats/nats.h>

#include <cstdio>
#include <string>

#include "bench/mq_load.hpp"

namespace {

constexpr std::size_t message_bytes = 4u << 10;
constexpr std::uint64_t warmup_messages = 2000;
constexpr double warmup_seconds_max = 1.0;

bool ok(natsStatus s, const char* what) {
  if (s == NATS_OK) return true;
  std::fprintf(stderr, "jetstream_mq: %s: %s\n", what, natsStatus_GetText(s));
  return false;
}

struct side {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  ~side() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(connection);
  }
  bool open(const std::string& url) {
    return ok(natsConnection_ConnectTo(&connection, url.c_str()), "connect") &&
           ok(natsConnection_JetStream(&js, connection, nullptr), "jetstream");
  }
};

/// One run through a fresh stream (memory storage), deleted afterwards.
bool run_once(side& producer, side& consumer, const std::string& name, double seconds, std::uint64_t messages_max,
              mq_load::outcome& out) {
  std::string subject = "bench." + name;
  const char* subjects[] = {subject.c_str()};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = name.c_str();
  config.Subjects = subjects;
  config.SubjectsLen = 1;
  config.Storage = js_MemoryStorage;
  jsStreamInfo* info = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (!ok(js_AddStream(&info, producer.js, &config, nullptr, &jerr), "add stream")) return false;
  jsStreamInfo_Destroy(info);

  jsSubOptions options;
  jsSubOptions_Init(&options);
  options.Config.AckPolicy = js_AckAll;
  natsSubscription* sub = nullptr;
  if (!ok(js_PullSubscribe(&sub, consumer.js, subject.c_str(), name.c_str(), nullptr, &options, &jerr),
          "pull subscribe")) {
    return false;
  }
  std::vector<std::byte> staging(message_bytes);
  mq_load::system_calls calls;
  calls.produce = [&](std::uint64_t n) {
    mq_load::fill(staging, n);
    jsPubAck* ack = nullptr;
    bool done = ok(js_Publish(&ack, producer.js, subject.c_str(), staging.data(), static_cast<int>(staging.size()),
                              nullptr, nullptr),
                   "publish");
    jsPubAck_Destroy(ack);
    return done;
  };
  calls.consume = [&](std::size_t max, const std::function<void(std::span<const std::byte>)>& seen) -> long {
    natsMsgList list{};
    natsStatus s = natsSubscription_Fetch(&list, sub, static_cast<int>(max), mq_load::batch_wait_ms, nullptr);
    if (s == NATS_TIMEOUT) return 0;
    if (!ok(s, "fetch")) return -1;
    for (int i = 0; i < list.Count; ++i) {
      auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(list.Msgs[i]));
      seen({data, static_cast<std::size_t>(natsMsg_GetDataLength(list.Msgs[i]))});
    }
    bool acked = list.Count == 0 || ok(natsMsg_AckSync(list.Msgs[list.Count - 1], nullptr, nullptr), "ack");
    long count = list.Count;
    natsMsgList_Destroy(&list);
    return acked ? count : -1;
  };
  out = mq_load::run(calls, message_bytes, seconds, messages_max);
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  if (!ok(js_DeleteStream(producer.js, name.c_str(), nullptr, &jerr), "delete stream")) ++out.errors;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string port;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string{argv[i]} == "--port") port = argv[i + 1];
  }
  if (port.empty()) {
    std::fputs("usage: jetstream_mq --port N [--seconds S]\n", stderr);
    return 2;
  }
  double seconds = mq_load::seconds_arg(argc, argv, 2.0);
  std::string url = "nats://127.0.0.1:" + port;
  int rc = 0;
  {
    side producer, consumer;
    if (!producer.open(url) || !consumer.open(url)) return 1;
    mq_load::outcome warm, got;
    if (!run_once(producer, consumer, "warm", std::min(seconds, warmup_seconds_max), warmup_messages, warm) ||
        !run_once(producer, consumer, "run", seconds, 0, got)) {
      rc = 1;
    } else {
      mq_load::print_run("jetstream 4k", got, message_bytes);
      auto failures = warm.bad + warm.errors + got.bad + got.errors;
      mq_load::print_figure("jetstream_4k_msgs_per_s", got.messages_per_s(), "msgs/s");
      std::printf("figure jetstream_4k_errors %llu count\n", static_cast<unsigned long long>(failures));
      if (failures != 0) rc = 1;
    }
  }
  nats_Close();
  return rc;
}
