// sluice mq create | rm | ls | produce | consume | status: topics,
// messages and consumer groups by hand (docs/mq.md).

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/cli/cli.hpp"
#include "runtime/units.hpp"
#include "sluice/mq.hpp"

namespace sluice::cli {
namespace {

struct mq_flags {
  std::string connect = default_connect;
  std::string config;
  int timeout_ms = 0;
  std::string topic;
  bool json = false;
  // create
  std::uint32_t partitions = 1;
  std::string max_age;
  std::string max_bytes;
  std::uint64_t max_messages = 0;
  std::string when_full = "block";
  std::uint32_t replicas = 1;
  std::string max_message = "64MiB";
  std::string dedupe_window;
  std::string dead_letter;
  // produce
  std::string source;
  std::string key;
  std::string message_id;
  std::int64_t partition = -1;
  std::string producer;
  // consume
  std::string group;
  std::uint64_t count = 1;
  std::string wait = "5s";
  bool no_ack = false;
};

int failed(std::string_view what, const error& e) {
  std::cerr << "sluice mq " << what << ": " << e.to_string() << "\n";
  return exit_failed;
}

int usage(std::string_view what, const std::string& message) {
  std::cerr << "sluice mq " << what << ": " << message << "\n";
  return exit_usage;
}

result<std::unique_ptr<client>> open(const mq_flags& f) {
  auto options = cli_client_options(f.config, f.timeout_ms);
  if (!options) return std::move(options).error();
  return client::connect(f.connect, *options);
}

std::chrono::milliseconds timeout_of(const mq_flags& f) { return std::chrono::milliseconds{f.timeout_ms}; }

/// A duration flag: "" is 0; otherwise a duration such as 30s or 500ms.
result<std::chrono::milliseconds> duration_flag(const std::string& text, std::string_view flag) {
  if (text.empty()) return std::chrono::milliseconds{0};
  auto d = parse_duration(text);
  if (!d || d->count() < 0) {
    return fail(errc::invalid_argument, std::string{flag} + ": not a duration (such as 30s or 500ms): '" + text + "'");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

result<std::uint64_t> size_flag(const std::string& text, std::string_view flag) {
  if (text.empty()) return std::uint64_t{0};
  auto n = parse_size(text);
  if (!n) return fail(errc::invalid_argument, std::string{flag} + ": not a size (such as 64MiB or 4096): '" + text + "'");
  return *n;
}

const char* policy_name(full_policy p) {
  switch (p) {
    case full_policy::block: return "block";
    case full_policy::reject: return "reject";
    case full_policy::drop_oldest: return "drop-oldest";
  }
  return "?";
}

int run_create(const mq_flags& f) {
  topic_options o;
  o.partitions = f.partitions;
  o.max_messages = f.max_messages;
  o.payload_replicas = f.replicas;
  o.timeout = timeout_of(f);
  auto age = duration_flag(f.max_age, "--max-age");
  if (!age) return usage("create", age.error().message());
  o.max_age = *age;
  auto window = duration_flag(f.dedupe_window, "--dedupe-window");
  if (!window) return usage("create", window.error().message());
  o.dedupe_window = *window;
  o.dead_letter = f.dead_letter;
  auto bytes = size_flag(f.max_bytes, "--max-bytes");
  if (!bytes) return usage("create", bytes.error().message());
  o.max_bytes = *bytes;
  auto message = size_flag(f.max_message, "--max-message");
  if (!message) return usage("create", message.error().message());
  o.max_message_bytes = *message;
  if (f.when_full == "block") {
    o.when_full = full_policy::block;
  } else if (f.when_full == "reject") {
    o.when_full = full_policy::reject;
  } else if (f.when_full == "drop-oldest") {
    o.when_full = full_policy::drop_oldest;
  } else {
    return usage("create", "--when-full: block, reject or drop-oldest, not '" + f.when_full + "'");
  }
  auto c = open(f);
  if (!c) return failed("create", c.error());
  mq q{**c};
  auto created = q.create_topic(f.topic, o);
  if (!created) return failed("create " + f.topic, created.error());
  std::cerr << "topic '" << f.topic << "' " << (*created ? "created" : "exists with these options") << "\n";
  return exit_ok;
}

int run_rm(const mq_flags& f) {
  auto c = open(f);
  if (!c) return failed("rm", c.error());
  mq q{**c};
  if (auto ok = q.delete_topic(f.topic, timeout_of(f)); !ok) return failed("rm " + f.topic, ok.error());
  std::cerr << "topic '" << f.topic << "' deleted\n";
  return exit_ok;
}

int run_ls(const mq_flags& f) {
  auto c = open(f);
  if (!c) return failed("ls", c.error());
  mq q{**c};
  auto topics = q.topics(timeout_of(f));
  if (!topics) return failed("ls", topics.error());
  if (f.json) {
    auto out = nlohmann::json::array();
    for (auto& t : *topics) {
      auto parts = nlohmann::json::array();
      for (auto& p : t.partitions) parts.push_back({{"start", p.start}, {"end", p.end}, {"bytes", p.bytes}});
      out.push_back({{"name", t.name},
                     {"partitions", parts},
                     {"max_age_ms", t.options.max_age.count()},
                     {"max_bytes", t.options.max_bytes},
                     {"max_messages", t.options.max_messages},
                     {"when_full", policy_name(t.options.when_full)},
                     {"payload_replicas", t.options.payload_replicas},
                     {"max_message_bytes", t.options.max_message_bytes},
                     {"dedupe_window_ms", t.options.dedupe_window.count()},
                     {"dead_letter", t.options.dead_letter}});
    }
    std::cout << out.dump(2) << "\n";
    return exit_ok;
  }
  for (auto& t : *topics) {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    for (auto& p : t.partitions) {
      messages += p.end - p.start;
      bytes += p.bytes;
    }
    std::cout << t.name << " partitions=" << t.partitions.size() << " messages=" << messages
              << " bytes=" << bytes << " when_full=" << policy_name(t.options.when_full)
              << " replicas=" << t.options.payload_replicas;
    if (!t.options.dead_letter.empty()) std::cout << " dead_letter=" << t.options.dead_letter;
    std::cout << "\n";
  }
  return exit_ok;
}

int run_produce(const mq_flags& f) {
  std::string bytes;
  if (f.source.empty() || f.source == "-") {
    bytes.assign(std::istreambuf_iterator<char>{std::cin}, {});
  } else {
    std::ifstream in{f.source, std::ios::binary};
    if (!in) return usage("produce", "cannot read '" + f.source + "'");
    bytes.assign(std::istreambuf_iterator<char>{in}, {});
  }
  auto c = open(f);
  if (!c) return failed("produce", c.error());
  mq q{**c, f.producer};
  produce_options o{.key = f.key, .message_id = f.message_id, .partition = {}, .timeout = timeout_of(f)};
  if (f.partition >= 0) o.partition = static_cast<std::uint32_t>(f.partition);
  auto at = q.produce(f.topic, std::string_view{bytes}, o);
  if (!at) return failed("produce " + f.topic, at.error());
  std::cout << "partition=" << at->partition << " offset=" << at->offset << (at->duplicate ? " duplicate" : "")
            << "\n";
  return exit_ok;
}

int run_consume(const mq_flags& f) {
  auto wait = duration_flag(f.wait, "--wait");
  if (!wait) return usage("consume", wait.error().message());
  auto c = open(f);
  if (!c) return failed("consume", c.error());
  mq q{**c};
  auto consumer = q.subscribe(f.group, {f.topic}, {.timeout = timeout_of(f)});
  if (!consumer) return failed("consume " + f.topic, consumer.error());
  std::uint64_t got = 0;
  auto end = std::chrono::steady_clock::now() + *wait;
  while (got < f.count) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto batch = consumer->poll({.max_messages = static_cast<std::size_t>(std::min<std::uint64_t>(f.count - got, 1024)),
                                 .wait = left});
    if (!batch) return failed("consume " + f.topic, batch.error());
    for (auto& m : *batch) {
      if (!m.payload) return failed("consume " + f.topic, m.payload.error());
      std::cerr << "partition=" << m.partition << " offset=" << m.offset << " deliveries=" << m.delivery_count
                << " bytes=" << m.payload->size();
      if (!m.message_id.empty()) std::cerr << " id=" << m.message_id;
      std::cerr << "\n";
      std::cout.write(reinterpret_cast<const char*>(m.payload->data()), static_cast<std::streamsize>(m.payload->size()));
      std::cout.flush();
      if (!f.no_ack) {
        if (auto ok = consumer->ack(m); !ok) return failed("consume " + f.topic, ok.error());
      }
      ++got;
    }
  }
  if (got < f.count) {
    std::cerr << "sluice mq consume " << f.topic << ": " << got << " of " << f.count << " messages within "
              << f.wait << "\n";
    return exit_failed;
  }
  return exit_ok;
}

int run_status(const mq_flags& f) {
  auto c = open(f);
  if (!c) return failed("status", c.error());
  mq q{**c};
  auto lag = q.lag(f.group, timeout_of(f));
  if (!lag) return failed("status", lag.error());
  if (f.json) {
    auto out = nlohmann::json::array();
    for (auto& p : *lag) {
      out.push_back({{"group", p.group},
                     {"topic", p.topic},
                     {"partition", p.partition},
                     {"member", p.member},
                     {"committed", p.committed},
                     {"next", p.next},
                     {"in_flight", p.in_flight},
                     {"lag_messages", p.messages},
                     {"lag_bytes", p.bytes}});
    }
    std::cout << out.dump(2) << "\n";
    return exit_ok;
  }
  for (auto& p : *lag) {
    std::cout << p.group << " " << p.topic << "/" << p.partition << " member=" << (p.member.empty() ? "-" : p.member)
              << " committed=" << p.committed << " next=" << p.next << " in_flight=" << p.in_flight
              << " lag=" << p.messages << " lag_bytes=" << p.bytes << "\n";
  }
  return exit_ok;
}

CLI::App* add_mq_subcommand(CLI::App& mq, const char* name, const char* help, mq_flags& f) {
  auto* cmd = mq.add_subcommand(name, help);
  cmd->add_option("--connect", f.connect, "The owner's HOST:PORT")->capture_default_str();
  cmd->add_option("--timeout-ms", f.timeout_ms,
                  "Deadline of each call in milliseconds (default: [client] request_timeout, 5 s)")
      ->check(CLI::Range(1, 300'000));
  cmd->add_option("--config", f.config, "TOML configuration file ([client] section)")->check(CLI::ExistingFile);
  return cmd;
}

}  // namespace

void add_mq_commands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<mq_flags>();
  auto* mq = app.add_subcommand("mq", "Topics, messages and consumer groups");
  mq->require_subcommand(1);

  auto* create = add_mq_subcommand(*mq, "create", "Create TOPIC", *f);
  create->add_option("TOPIC", f->topic, "The topic's name ([A-Za-z0-9._-])")->required();
  create->add_option("--partitions", f->partitions, "Partitions (order is kept per partition)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  create->add_option("--max-age", f->max_age, "Drop messages older than this (30s, 2h)");
  create->add_option("--max-bytes", f->max_bytes, "Hold at most this much per partition (1GiB)");
  create->add_option("--max-messages", f->max_messages, "Hold at most N messages per partition");
  create->add_option("--when-full", f->when_full, "block, reject or drop-oldest")->capture_default_str();
  create->add_option("--replicas", f->replicas, "Copies of each payload on distinct owners")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  create->add_option("--max-message", f->max_message, "The largest message taken")->capture_default_str();
  create->add_option("--dedupe-window", f->dedupe_window, "Append a (producer, message id) once within this");
  create->add_option("--dead-letter", f->dead_letter, "Hand messages that ran out of deliveries to this topic");
  create->callback([f, &exit_code] { exit_code = run_create(*f); });

  auto* rm = add_mq_subcommand(*mq, "rm", "Delete TOPIC and every message in it", *f);
  rm->add_option("TOPIC", f->topic, "The topic")->required();
  rm->callback([f, &exit_code] { exit_code = run_rm(*f); });

  auto* ls = add_mq_subcommand(*mq, "ls", "List topics (messages held, bytes, policy)", *f);
  ls->add_flag("--json", f->json, "Print JSON instead of lines");
  ls->callback([f, &exit_code] { exit_code = run_ls(*f); });

  auto* produce = add_mq_subcommand(*mq, "produce", "Produce the bytes of FILE (or stdin) to TOPIC", *f);
  produce->add_option("TOPIC", f->topic, "The topic")->required();
  produce->add_option("FILE", f->source, "File to read, or - for stdin (default)");
  produce->add_option("--key", f->key, "Partition key: messages with one key keep their order");
  produce->add_option("--partition", f->partition, "Produce to this partition")->check(CLI::Range(0, 255));
  produce->add_option("--message-id", f->message_id, "Name the message for dedupe");
  produce->add_option("--producer", f->producer, "Name the producer for dedupe (default: a fresh id)");
  produce->callback([f, &exit_code] { exit_code = run_produce(*f); });

  auto* consume = add_mq_subcommand(*mq, "consume", "Consume messages of TOPIC as a member of GROUP; payloads to stdout", *f);
  consume->add_option("TOPIC", f->topic, "The topic")->required();
  consume->add_option("--group", f->group, "The consumer group")->required();
  consume->add_option("-n,--count", f->count, "Messages to consume")->check(CLI::Range(1, 1'000'000))->capture_default_str();
  consume->add_option("--wait", f->wait, "Give up (exit 1) when they did not come within this")->capture_default_str();
  consume->add_flag("--no-ack", f->no_ack, "Do not ack: the messages go out again");
  consume->callback([f, &exit_code] { exit_code = run_consume(*f); });

  auto* status = add_mq_subcommand(*mq, "status", "Lag per group and partition", *f);
  status->add_option("GROUP", f->group, "Only this group (default: every group)");
  status->add_flag("--json", f->json, "Print JSON instead of lines");
  status->callback([f, &exit_code] { exit_code = run_status(*f); });
}

}  // namespace sluice::cli
