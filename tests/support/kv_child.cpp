// A client process for multi-process tests. Prints "ready" on stdout when
// it has done its setup, then does what it was asked:
//
//   kv_child ADDRESS reserve KEY SIZE    reserve, write half, wait to be killed
//   kv_child ADDRESS hold KEY            get a view of KEY and hold it forever
//   kv_child ADDRESS pin KEY             pin KEY (for its session) and wait
//   kv_child ADDRESS hammer ID OPS SIZE  put/get/verify OPS values of its own;
//                                        prints "ok N" or "bad ..." and exits
//   kv_child ADDRESS mq-hold TOPIC GROUP TAKE ACK
//                                        joins GROUP (lease 1 s), polls until
//                                        it holds TAKE messages, acks the first
//                                        ACK, prints "ready" and one line per
//                                        acked offset ("acked P O"), then polls
//                                        on (renewing its lease) until killed
//   kv_child ADDRESS mq-produce TOPIC SIZE
//                                        produces SIZE-byte messages, each its
//                                        number then a pattern of it, without
//                                        end; "ready" after the first

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "sluice/client.hpp"
#include "sluice/mq.hpp"
#include "tests/support/mq_pattern.hpp"

namespace {

std::string pattern(const std::string& key, std::size_t size, std::uint64_t round) {
  std::string s(size, '\0');
  std::uint64_t x = std::hash<std::string>{}(key) ^ (round * 0x9e3779b97f4a7c15ULL);
  for (auto& c : s) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

int hammer(sluice::client& kv, const std::string& id, int ops, std::size_t size) {
  for (int i = 0; i < ops; ++i) {
    auto key = "child/" + id + "/" + std::to_string(i % 8);
    auto value = pattern(key, size, static_cast<std::uint64_t>(i));
    if (auto put = kv.put(key, value); !put) {
      std::printf("bad put %s: %s\n", key.c_str(), put.error().to_string().c_str());
      return 1;
    }
    auto got = kv.get(key);
    if (!got || got->str() != value) {
      std::printf("bad get %s: %s\n", key.c_str(), got ? "wrong bytes" : got.error().to_string().c_str());
      return 1;
    }
  }
  std::printf("ok %d\n", ops);
  return 0;
}

int mq_hold(sluice::client& c, const std::string& topic, const std::string& group, std::size_t take,
            std::size_t ack) {
  sluice::mq q{c};
  sluice::consumer_options o;
  o.lease = std::chrono::milliseconds{1000};
  o.prefetch = static_cast<std::uint32_t>(take);
  auto consumer = q.subscribe(group, {topic}, o);
  if (!consumer) {
    std::printf("bad subscribe: %s\n", consumer.error().to_string().c_str());
    return 1;
  }
  std::vector<sluice::mq_message> held;
  while (held.size() < take) {
    auto batch = consumer->poll({.max_messages = take - held.size(), .wait = std::chrono::milliseconds{500}});
    if (!batch) {
      std::printf("bad poll: %s\n", batch.error().to_string().c_str());
      return 1;
    }
    for (auto& m : *batch) held.push_back(std::move(m));
  }
  std::printf("ready\n");
  for (std::size_t i = 0; i < ack; ++i) {
    if (auto ok = consumer->ack(held[i]); !ok) {
      std::printf("bad ack: %s\n", ok.error().to_string().c_str());
      return 1;
    }
    std::printf("acked %u %llu\n", held[i].partition, static_cast<unsigned long long>(held[i].offset));
  }
  std::printf("held\n");
  std::fflush(stdout);
  // Holds the rest unacked, keeping its lease, until killed.
  for (;;) (void)consumer->poll({.max_messages = 1, .max_bytes = 0, .wait = std::chrono::milliseconds{200}});
}

int mq_produce(sluice::client& c, const std::string& topic, std::size_t size) {
  sluice::mq q{c, "kv-child"};
  for (std::uint64_t n = 0;; ++n) {
    auto room = q.reserve(topic, size);
    if (!room) {
      std::printf("bad reserve: %s\n", room.error().to_string().c_str());
      return 1;
    }
    auto body = sluice::test::numbered_message(n, size);
    // Written in two halves, so a kill may land between them.
    std::memcpy(room->bytes().data(), body.data(), size / 2);
    std::memcpy(room->bytes().data() + size / 2, body.data() + size / 2, size - size / 2);
    if (auto at = q.produce(std::move(*room)); !at) {
      std::printf("bad produce: %s\n", at.error().to_string().c_str());
      return 1;
    }
    if (n == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string address = argv[1], action = argv[2];
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  // Often enough for owners that end silent sessions quickly (tests).
  options.keepalive = std::chrono::milliseconds{200};
  auto kv = sluice::client::connect(address, options);
  if (!kv) {
    std::printf("bad connect: %s\n", kv.error().to_string().c_str());
    return 1;
  }
  if (action == "reserve" && argc == 5) {
    auto w = (*kv)->reserve(argv[3], std::stoull(argv[4]));
    if (!w) {
      std::printf("bad reserve: %s\n", w.error().to_string().c_str());
      return 1;
    }
    std::memset(w->bytes().data(), 'x', w->bytes().size() / 2);
    std::printf("ready\n");
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "hold" && argc == 4) {
    auto v = (*kv)->get(argv[3]);
    if (!v) {
      std::printf("bad get: %s\n", v.error().to_string().c_str());
      return 1;
    }
    std::printf("ready %zu\n", v->size());
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "pin" && argc == 4) {
    auto v = (*kv)->pin(argv[3]);
    if (!v) {
      std::printf("bad pin: %s\n", v.error().to_string().c_str());
      return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    ::pause();
    return 0;
  }
  if (action == "hammer" && argc == 6) {
    std::printf("ready\n");
    std::fflush(stdout);
    return hammer(**kv, argv[3], std::stoi(argv[4]), std::stoull(argv[5]));
  }
  if (action == "mq-hold" && argc == 7) {
    return mq_hold(**kv, argv[3], argv[4], std::stoull(argv[5]), std::stoull(argv[6]));
  }
  if (action == "mq-produce" && argc == 5) return mq_produce(**kv, argv[3], std::stoull(argv[4]));
  return 2;
}
