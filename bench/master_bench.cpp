// master_bench: the master's metadata path against Redis, and the master's
// recovery from its data directory.
//
//   master_bench --sluice-bin PATH [--redis-memory HOST:PORT]
//                [--redis-durable HOST:PORT] [--seconds N] [--depth N]
//                [--batch N] [--report-depth N] [--objects N] [--server-cpu N]
//
// Throughput. The bench starts `sluice master` itself (pinned to
// --server-cpu with taskset when given) and speaks the wire protocol to it
// as an owner would: it registers, then keeps --depth puts in flight, each
// a `place` and then a `commit` of a 4 KiB value's metadata, for --seconds;
// then, holding every key slot as an owner that commits puts itself does,
// --report-depth `owner_commits` reports of --batch puts each; then
// --depth `locate`s of keys it committed. Against Redis it pipelines the
// same depth of SET (one 24-byte record per key: what the master stores),
// MSETs of --batch keys, and GET. Two configurations, each against its like:
//   durable: the master with a data directory (fsync on every group
//            commit) against Redis with appendonly yes, appendfsync always;
//   memory:  the master without one against Redis without persistence.
// A "metadata op" is a put the master committed or a locate answered:
// master_meta_ops_per_s is over owner-committed puts (the path of plain
// puts) and locates; master_place_meta_ops_per_s counts a put through
// place and commit as two ops.
//
// Recovery. It writes --objects objects' records into a fresh master.db,
// starts `sluice master --data-dir` on it and measures the time from the
// process start until the master answers a request on its port, and the
// master's resident memory against a master started on an empty directory.
//
// Output: `figure NAME VALUE UNIT` lines. Exit status 0 when every request
// succeeded, 1 otherwise, 2 for bad usage.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/master/persistence.hpp"
#include "runtime/keys.hpp"
#include "runtime/rng.hpp"
#include "runtime/storage/sqlite_store.hpp"
#include "runtime/wire/codec.hpp"
#include "tests/support/process.hpp"

namespace {

using namespace std::chrono_literals;
using bench_clock = std::chrono::steady_clock;
using sluice::node_id;
namespace wire = sluice::wire;

/// Size every benchmark put declares: a typical small value.
constexpr std::uint64_t value_size = 4096;
/// How long a request may take before the bench gives up on the run.
constexpr auto request_deadline = 10s;
/// Owners must report this often or the master marks them down.
constexpr auto heartbeat_every = 400ms;
/// How long to wait for a started master to print its address.
constexpr auto start_wait = 60s;
/// Bytes a Redis record holds: version, size, holder (what the master keeps).
constexpr std::size_t record_bytes = 24;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "master_bench: %s\n", what.c_str());
  std::exit(1);
}

int connect_tcp(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) die("bad address " + address);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) die("bad address " + address);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    die("cannot connect to " + address + ": " + std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/// A byte stream with a write buffer flushed in one go and a read buffer.
class stream {
 public:
  explicit stream(int fd) : fd_(fd) {}
  ~stream() { ::close(fd_); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  void write(const void* data, std::size_t n) { out_.append(static_cast<const char*>(data), n); }
  void write(std::string_view s) { out_.append(s); }
  void flush() {
    std::size_t done = 0;
    while (done < out_.size()) {
      auto n = ::send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
      if (n <= 0) die(std::string{"send: "} + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    out_.clear();
  }
  /// Reads what is there (waits up to `timeout` for something).
  bool fill(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[1 << 16];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) die("the server closed the connection");
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  std::string& in() { return in_; }

 private:
  int fd_;
  std::string out_;
  std::string in_;
};

// --- the master, spoken to as an owner -------------------------------------

class wire_owner {
 public:
  explicit wire_owner(const std::string& address) : s_(connect_tcp(address)) {
    me_ = node_id{sluice::entropy_seed() | 1};
    send(0, wire::hello{sluice::role::owner, wire::protocol_version, "bench-owner", "127.0.0.1:1"});
  }

  /// Sends a request; returns its id.
  std::uint64_t request(wire::body body) {
    auto id = next_id_++;
    send(id, std::move(body));
    return id;
  }
  void flush() { s_.flush(); }

  /// The next reply, answering requests the master sends on the way.
  std::optional<wire::message> next_reply(std::chrono::milliseconds timeout) {
    while (true) {
      if (auto m = parse()) {
        if (m->env.reply_to != 0) return m;
        if (m->env.request_id != 0) {  // an invalidation, say: acknowledge it
          send_reply(m->env.request_id, wire::ok_reply{});
          s_.flush();
        }
        continue;
      }
      if (!s_.fill(timeout)) return std::nullopt;
    }
  }

  /// A reply already read, if any (never waits).
  std::optional<wire::message> ready_reply() {
    while (auto m = parse()) {
      if (m->env.reply_to != 0) return m;
      if (m->env.request_id != 0) send_reply(m->env.request_id, wire::ok_reply{});
    }
    return std::nullopt;
  }

  /// Waits for the reply to `id`, dropping others.
  wire::message await(std::uint64_t id) {
    flush();
    auto give_up = bench_clock::now() + request_deadline;
    while (bench_clock::now() < give_up) {
      auto m = next_reply(100ms);
      if (m && m->env.reply_to == id) return std::move(*m);
    }
    die("no reply from the master");
  }

  void register_as_owner() {
    auto id = request(wire::register_owner{"bench-owner", "127.0.0.1:1", 1ULL << 50, 1, false});
    auto reply = await(id);
    if (!std::holds_alternative<wire::register_owner_reply>(reply.env.body)) die("registration refused");
  }

  node_id id() const { return me_; }

 private:
  void send(std::uint64_t id, wire::body body) {
    wire::envelope env;
    env.request_id = id;
    env.source = me_;
    env.deadline_us = id == 0 ? 0 : static_cast<std::uint64_t>(std::chrono::microseconds{request_deadline}.count());
    env.body = std::move(body);
    auto flat = wire::flatten(wire::encode(env));
    s_.write(flat.data(), flat.size());
  }
  void send_reply(std::uint64_t to, wire::body body) {
    wire::envelope env;
    env.reply_to = to;
    env.source = me_;
    env.body = std::move(body);
    auto flat = wire::flatten(wire::encode(env));
    s_.write(flat.data(), flat.size());
  }
  std::optional<wire::message> parse() {
    auto& in = s_.in();
    if (in.size() - consumed_ < wire::frame_header_bytes) return compact(), std::nullopt;
    auto* head = reinterpret_cast<const std::byte*>(in.data() + consumed_);
    auto h = wire::parse_frame_header(std::span<const std::byte, wire::frame_header_bytes>{head, wire::frame_header_bytes},
                                      limits_);
    if (!h) die("bad frame from the master: " + h.error().to_string());
    auto total = wire::frame_header_bytes + h->envelope_bytes + h->payload_bytes;
    if (in.size() - consumed_ < total) return compact(), std::nullopt;
    auto m = wire::decode_bytes(std::span<const std::byte>{head, total}, limits_);
    if (!m) die("bad envelope from the master: " + m.error().to_string());
    consumed_ += total;
    return std::move(*m);
  }
  void compact() {
    s_.in().erase(0, consumed_);
    consumed_ = 0;
  }

  stream s_;
  node_id me_;
  std::uint64_t next_id_ = 1;
  std::size_t consumed_ = 0;
  wire::frame_limits limits_;
};

std::string bench_key(std::uint64_t n) { return "bench/" + std::to_string(n); }

struct rate {
  double per_s = 0;
  std::uint64_t errors = 0;
  std::uint64_t done = 0;
};

/// Runs one phase: writes the requests sent so far, then hands each reply
/// to `on_reply(reply, more)` — `more`: the phase's `seconds` are not up,
/// so it may send more requests — every reply that has arrived before one
/// write of the requests they freed, with a heartbeat now and then so the
/// master keeps the bench up, until `busy()` is false. Returns the seconds
/// it ran.
template <class Busy, class OnReply>
double drive(wire_owner& w, double seconds, Busy busy, OnReply on_reply) {
  w.flush();
  auto t0 = bench_clock::now();
  auto until = t0 + std::chrono::duration<double>(seconds);
  auto next_heartbeat = t0 + heartbeat_every;
  while (busy()) {
    auto m = w.next_reply(request_deadline);
    if (!m) die("the master stopped answering");
    bool more = bench_clock::now() < until;
    for (; m; m = w.ready_reply()) on_reply(*m, more);
    if (auto now = bench_clock::now(); now >= next_heartbeat) {
      (void)w.request(wire::heartbeat{0, 0, 0, {}, {}});
      next_heartbeat = now + heartbeat_every;
    }
    w.flush();
  }
  return std::chrono::duration<double>(bench_clock::now() - t0).count();
}

/// Keeps `depth` puts (place, then commit) in flight for `seconds`.
rate master_puts(wire_owner& w, int depth, double seconds, std::uint64_t& committed) {
  std::unordered_map<std::uint64_t, std::uint64_t> inflight;  // request id -> key number
  std::uint64_t next = committed, done = 0, errors = 0;
  auto start_put = [&] {
    auto n = next++;
    inflight.emplace(w.request(wire::place{bench_key(n), value_size, w.id(), {}, 0, 1, ""}), n);
  };
  for (int i = 0; i < depth; ++i) start_put();
  double took = drive(w, seconds, [&] { return !inflight.empty(); }, [&](wire::message& m, bool more) {
    auto it = inflight.find(m.env.reply_to);
    if (it == inflight.end()) return;  // a heartbeat's answer
    auto n = it->second;
    inflight.erase(it);
    if (auto* placed = std::get_if<wire::place_reply>(&m.env.body)) {
      inflight.emplace(w.request(wire::commit{bench_key(n), placed->version, value_size}), n);
      return;
    }
    std::holds_alternative<wire::commit_reply>(m.env.body) ? ++done : ++errors;
    if (more) start_put();
  });
  committed = next;
  return {static_cast<double>(done) / took, errors, done};
}

/// Keeps `depth` reports of `batch` owner-committed puts each in flight for
/// `seconds`: what a plain put costs the master once an owner holds its
/// key's slot — the owner commits it itself and reports it with others
/// (owner_commits). The bench claims every slot first, as an owner does
/// after its first put in each, and asks for a fresh block of versions
/// whenever the one it has runs low, as owners do.
rate master_owner_commits(wire_owner& w, int depth, int batch, double seconds, std::uint64_t& committed) {
  wire::claim all;
  for (std::uint16_t slot = 0; slot < sluice::key_slots; ++slot) all.slots.push_back(slot);
  all.versions = true;
  auto granted = w.await(w.request(std::move(all)));
  auto* block = std::get_if<wire::claim_reply>(&granted.env.body);
  if (block == nullptr || block->granted.size() != sluice::key_slots) die("the master did not hand out every slot");
  std::uint64_t version = block->block_first, version_end = block->block_first + block->block_count;
  std::uint64_t next_version_block = 0, more_versions = 0;  // a claim in flight, and the block it brings
  std::uint64_t claim_id = 0;

  std::unordered_map<std::uint64_t, std::uint64_t> inflight;  // request id -> entries
  std::uint64_t next = committed, seq = 1, done = 0, errors = 0;
  auto start = [&]() -> bool {
    if (version_end - version < static_cast<std::uint64_t>(batch)) {
      if (more_versions == 0) return false;  // wait for the claim's reply
      version = next_version_block;
      version_end = next_version_block + more_versions;
      more_versions = 0;
    }
    if (claim_id == 0 && more_versions == 0 && version_end - version < 4ULL * depth * batch) {
      claim_id = w.request(wire::claim{{}, true});
    }
    wire::owner_commits report{seq, {}};
    report.entries.reserve(static_cast<std::size_t>(batch));
    for (int i = 0; i < batch; ++i) report.entries.push_back({bench_key(next++), version++, value_size});
    seq += static_cast<std::uint64_t>(batch);
    inflight.emplace(w.request(std::move(report)), batch);
    return true;
  };
  int stalled = 0;
  for (int i = 0; i < depth; ++i) stalled += start() ? 0 : 1;
  auto busy = [&] { return !inflight.empty() || claim_id != 0; };
  double took = drive(w, seconds, busy, [&](wire::message& m, bool more) {
    if (m.env.reply_to == claim_id) {
      claim_id = 0;
      auto* b = std::get_if<wire::claim_reply>(&m.env.body);
      if (b == nullptr || b->block_count == 0) die("the master gave no versions");
      next_version_block = b->block_first;
      more_versions = b->block_count;
      for (; stalled > 0 && more && start(); --stalled) {}
      return;
    }
    auto it = inflight.find(m.env.reply_to);
    if (it == inflight.end()) return;  // a heartbeat's answer
    auto entries = it->second;
    inflight.erase(it);
    auto* r = std::get_if<wire::owner_commits_reply>(&m.env.body);
    (r != nullptr && r->refused.empty() ? done : errors) += entries;
    if (more && !start()) ++stalled;
  });
  committed = next;
  return {static_cast<double>(done) / took, errors, done};
}

/// Keeps `depth` locates of committed keys in flight for `seconds`.
rate master_locates(wire_owner& w, int depth, double seconds, std::uint64_t committed) {
  sluice::rng random{7};
  std::unordered_set<std::uint64_t> inflight;
  std::uint64_t done = 0, errors = 0;
  auto start = [&] { inflight.insert(w.request(wire::locate{bench_key(random.uniform(committed))})); };
  for (int i = 0; i < depth; ++i) start();
  double took = drive(w, seconds, [&] { return !inflight.empty(); }, [&](wire::message& m, bool more) {
    if (inflight.erase(m.env.reply_to) == 0) return;
    std::holds_alternative<wire::locate_reply>(m.env.body) ? ++done : ++errors;
    if (more) start();
  });
  return {static_cast<double>(done) / took, errors, done};
}

// --- Redis, pipelined --------------------------------------------------------

class redis {
 public:
  explicit redis(const std::string& address) : s_(connect_tcp(address)) {}

  void set(const std::string& key, std::string_view value) { command({"SET", key, value}); }
  void get(const std::string& key) { command({"GET", key}); }
  void mset(const std::vector<std::string>& pairs) {
    std::string out = "*" + std::to_string(pairs.size() + 1) + "\r\n$4\r\nMSET\r\n";
    for (auto& a : pairs) {
      out += "$" + std::to_string(a.size()) + "\r\n";
      out += a;
      out += "\r\n";
    }
    s_.write(out);
  }
  void flush() { s_.flush(); }

  /// The CPU time the server has used, user and system, all its threads
  /// (INFO cpu), in seconds. Call with no command in flight.
  double cpu_seconds() {
    command({"INFO", "cpu"});
    s_.flush();
    auto& in = s_.in();
    std::size_t eol = std::string::npos;
    while ((eol = in.find("\r\n")) == std::string::npos) {
      if (!s_.fill(request_deadline)) die("redis stopped answering");
    }
    if (in[0] != '$') die("unexpected reply to INFO from redis: " + in.substr(0, eol));
    auto total = eol + 2 + static_cast<std::size_t>(std::stoll(in.substr(1, eol - 1))) + 2;
    while (in.size() < total) {
      if (!s_.fill(request_deadline)) die("redis stopped answering");
    }
    auto text = in.substr(eol + 2, total - eol - 4);
    in.erase(0, total);
    double cpu = 0;
    int found = 0;
    for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
      auto at = text.find(std::string{"\n"} + field);
      if (at == std::string::npos && text.rfind(field, 0) != 0) continue;
      at = at == std::string::npos ? 0 : at + 1;
      cpu += std::stod(text.substr(at + std::strlen(field)));
      ++found;
    }
    if (found != 2) die("redis's INFO cpu names no used_cpu_sys and used_cpu_user");
    return cpu;
  }

  /// A reply already read, if any (never waits): false for an error or a
  /// nil.
  std::optional<bool> ready_reply() { return s_.in().empty() ? std::nullopt : parse(); }

  /// Reads one reply; false when it was an error or a nil.
  bool reply() {
    while (true) {
      if (auto ok = parse()) return *ok;
      if (!s_.fill(request_deadline)) die("redis stopped answering");
    }
  }

 private:
  void command(std::initializer_list<std::string_view> args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (auto a : args) {
      out += "$" + std::to_string(a.size()) + "\r\n";
      out += a;
      out += "\r\n";
    }
    s_.write(out);
  }
  std::optional<bool> parse() {
    auto& in = s_.in();
    auto eol = in.find("\r\n");
    if (eol == std::string::npos) return std::nullopt;
    char kind = in[0];
    if (kind == '+' || kind == '-' || kind == ':') {
      in.erase(0, eol + 2);
      return kind != '-';
    }
    if (kind != '$') die("unexpected reply from redis: " + in.substr(0, eol));
    auto len = std::stoll(in.substr(1, eol - 1));
    if (len < 0) {
      in.erase(0, eol + 2);
      return false;
    }
    auto total = eol + 2 + static_cast<std::size_t>(len) + 2;
    if (in.size() < total) return std::nullopt;
    in.erase(0, total);
    return true;
  }

  stream s_;
};

enum class redis_op { set, get };

/// Keeps `depth` commands in flight for `seconds`: SETs (MSETs of `batch`
/// keys when `batch` > 1) or GETs. The rate is of keys.
rate redis_ops(redis& r, redis_op op, int batch, int depth, double seconds, std::uint64_t& keys) {
  std::string record(record_bytes, 'r');
  sluice::rng random{7};
  std::uint64_t done = 0, errors = 0, next = keys, outstanding = 0;
  auto start = [&] {
    if (op == redis_op::get) {
      r.get(bench_key(random.uniform(keys)));
    } else if (batch == 1) {
      r.set(bench_key(next++), record);
    } else {
      std::vector<std::string> pairs;
      pairs.reserve(2 * static_cast<std::size_t>(batch));
      for (int i = 0; i < batch; ++i) {
        pairs.push_back(bench_key(next++));
        pairs.push_back(record);
      }
      r.mset(pairs);
    }
    ++outstanding;
  };
  for (int i = 0; i < depth; ++i) start();
  r.flush();
  auto t0 = bench_clock::now();
  auto until = t0 + std::chrono::duration<double>(seconds);
  auto per = static_cast<std::uint64_t>(op == redis_op::get ? 1 : batch);
  while (outstanding > 0) {
    bool more = bench_clock::now() < until;
    // Every reply already read, then one write of the commands they free.
    for (auto ok = std::optional<bool>{r.reply()}; ok; ok = r.ready_reply()) {
      --outstanding;
      *ok ? done += per : errors += per;
      if (more) start();
    }
    r.flush();
  }
  double took = std::chrono::duration<double>(bench_clock::now() - t0).count();
  if (op == redis_op::set) keys = next;
  return {static_cast<double>(done) / took, errors, done};
}

// --- masters as processes ----------------------------------------------------

struct options {
  std::string sluice_bin;
  std::string redis_memory, redis_durable;
  double seconds = 2;
  int depth = 64;
  int batch = 256;       ///< puts per owner_commits report (keys per MSET): an owner reports every 256
  int report_depth = 4;  ///< reports (MSETs) in flight
  std::uint64_t objects = 1'000'000;
  int server_cpu = -1;
};

std::vector<std::string> master_command(const options& o, const std::string& data_dir, std::string& program) {
  std::vector<std::string> args;
  if (o.server_cpu >= 0) {
    program = "/usr/bin/taskset";
    args = {"-c", std::to_string(o.server_cpu), o.sluice_bin};
  } else {
    program = o.sluice_bin;
  }
  for (auto a : {"master", "--listen", "127.0.0.1:0"}) args.emplace_back(a);
  if (!data_dir.empty()) {
    args.emplace_back("--data-dir");
    args.push_back(data_dir);
  } else {
    args.emplace_back("--in-memory");
  }
  return args;
}

struct running_master {
  std::unique_ptr<sluice::test::process> proc;
  std::string address;
  double started_s = 0;  ///< from spawn to the address line
};

running_master start_master(const options& o, const std::string& data_dir) {
  std::string program;
  auto args = master_command(o, data_dir, program);
  running_master m;
  auto t0 = bench_clock::now();
  m.proc = std::make_unique<sluice::test::process>(program, args, sluice::test::temp_path("master.log"));
  auto line = m.proc->read_line(std::chrono::duration_cast<std::chrono::milliseconds>(start_wait));
  if (!line) die("the master did not start");
  m.address = sluice::test::address_in(*line);
  m.started_s = std::chrono::duration<double>(bench_clock::now() - t0).count();
  return m;
}

/// CPU time a process (all its threads) used so far, user and system, in
/// seconds.
double cpu_seconds(int pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text{std::istreambuf_iterator<char>{stat}, {}};
  // Fields after the command name (in parentheses, which may hold spaces):
  // state is field 3, utime 14 and stime 15.
  auto close = text.rfind(')');
  if (close == std::string::npos) die("no stat for pid " + std::to_string(pid));
  std::istringstream fields{text.substr(close + 2)};
  std::string field;
  double ticks = 0;
  for (int n = 3; n <= 15 && fields >> field; ++n) {
    if (n >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// Resident memory of a process, in bytes.
std::uint64_t rss_bytes(int pid) {
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6)) * 1024;
  }
  die("no VmRSS for pid " + std::to_string(pid));
}

std::string fresh_dir(const std::string& stem) {
  auto dir = sluice::test::temp_path(stem);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void figure(const char* name, double value, const char* unit) {
  std::printf("figure %s %.6g %s\n", name, value, unit);
  std::fflush(stdout);
}

int run_throughput(const options& o, bool durable) {
  const char* mode = durable ? "durable" : "memory";
  auto dir = durable ? fresh_dir("master-bench") : std::string{};
  auto m = start_master(o, dir);
  wire_owner w{m.address};
  w.register_as_owner();
  std::uint64_t committed = 0;
  // The master's CPU time in each phase: its ops per CPU-second are what
  // one core of it does, whether or not the bench kept it busy.
  auto pid = m.proc->pid();
  auto cpu0 = cpu_seconds(pid);
  auto puts = master_puts(w, o.depth, o.seconds, committed);
  auto cpu1 = cpu_seconds(pid);
  auto owned = master_owner_commits(w, o.report_depth, o.batch, o.seconds, committed);
  auto cpu2 = cpu_seconds(pid);
  auto locates = master_locates(w, o.depth, o.seconds, committed);
  auto cpu3 = cpu_seconds(pid);
  auto per_cpu = [](std::uint64_t ops, double cpu) { return cpu > 0 ? static_cast<double>(ops) / cpu : 0.0; };
  double owned_cpu = per_cpu(owned.done, cpu2 - cpu1), locate_cpu = per_cpu(locates.done, cpu3 - cpu2);
  double meta_cpu = per_cpu(owned.done + locates.done, cpu3 - cpu1);
  double place_cpu = per_cpu(2 * puts.done, cpu1 - cpu0);
  // Every phase ran equally long. A put the owner committed is one op (one
  // entry of a report), a place and commit two, a locate one.
  double meta = (owned.per_s + locates.per_s) / 2;
  double place_meta = (2 * puts.per_s + locates.per_s) / 2;
  std::printf("master (%s): %.0f put-commits/s through place and commit, %.0f owner-committed puts/s "
              "(reports of %d, %d in flight), %.0f locates/s, depth %d\n",
              mode, puts.per_s, owned.per_s, o.batch, o.report_depth, locates.per_s, o.depth);
  std::printf("master (%s) per CPU-second of the master: %.0f metadata ops (%.0f owner-committed puts, "
              "%.0f locates), %.0f place or commit requests\n",
              mode, meta_cpu, owned_cpu, locate_cpu, place_cpu);
  m.proc.reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);

  int failed = puts.errors + owned.errors + locates.errors > 0 ? 1 : 0;
  std::string suffix = durable ? "" : "_memory";
  figure(("master_put_commit_per_s" + suffix).c_str(), puts.per_s, "ops/s");
  figure(("master_owner_commit_per_s" + suffix).c_str(), owned.per_s, "ops/s");
  figure(("master_locate_per_s" + suffix).c_str(), locates.per_s, "ops/s");
  figure(("master_meta_ops_per_s" + suffix).c_str(), meta, "ops/s");
  figure(("master_place_meta_ops_per_s" + suffix).c_str(), place_meta, "ops/s");
  figure(("master_meta_ops_per_cpu_s" + suffix).c_str(), meta_cpu, "ops/s");
  figure(("master_owner_commit_per_cpu_s" + suffix).c_str(), owned_cpu, "ops/s");
  figure(("master_locate_per_cpu_s" + suffix).c_str(), locate_cpu, "ops/s");
  figure(("master_place_commit_requests_per_cpu_s" + suffix).c_str(), place_cpu, "ops/s");

  const auto& peer = durable ? o.redis_durable : o.redis_memory;
  if (!peer.empty()) {
    redis r{peer};
    std::uint64_t keys = 0;
    // Redis's CPU time in each phase too: its ops per CPU-second beside
    // the master's.
    auto rcpu0 = r.cpu_seconds();
    auto sets = redis_ops(r, redis_op::set, 1, o.depth, o.seconds, keys);
    auto rcpu1 = r.cpu_seconds();
    auto msets = redis_ops(r, redis_op::set, o.batch, o.report_depth, o.seconds, keys);
    auto rcpu2 = r.cpu_seconds();
    auto gets = redis_ops(r, redis_op::get, 1, o.depth, o.seconds, keys);
    auto rcpu3 = r.cpu_seconds();
    double set_cpu = per_cpu(sets.done, rcpu1 - rcpu0), mset_cpu = per_cpu(msets.done, rcpu2 - rcpu1);
    double get_cpu = per_cpu(gets.done, rcpu3 - rcpu2);
    std::printf("redis (%s): %.0f SET/s, %.0f keys/s in MSETs of %d (%d in flight), %.0f GET/s, depth %d\n", mode,
                sets.per_s, msets.per_s, o.batch, o.report_depth, gets.per_s, o.depth);
    figure(("redis_set_per_s" + suffix).c_str(), sets.per_s, "ops/s");
    figure(("redis_mset_keys_per_s" + suffix).c_str(), msets.per_s, "ops/s");
    figure(("redis_get_per_s" + suffix).c_str(), gets.per_s, "ops/s");
    figure(("ratio_master_put_commit_vs_redis_set" + suffix).c_str(), puts.per_s / sets.per_s, "ratio");
    figure(("ratio_master_owner_commit_vs_redis_mset" + suffix).c_str(), owned.per_s / msets.per_s, "ratio");
    figure(("ratio_master_locate_vs_redis_get" + suffix).c_str(), locates.per_s / gets.per_s, "ratio");
    std::printf("redis (%s) per CPU-second of redis: %.0f SETs, %.0f keys in MSETs, %.0f GETs\n", mode, set_cpu,
                mset_cpu, get_cpu);
    figure(("redis_set_per_cpu_s" + suffix).c_str(), set_cpu, "ops/s");
    figure(("redis_mset_keys_per_cpu_s" + suffix).c_str(), mset_cpu, "ops/s");
    figure(("redis_get_per_cpu_s" + suffix).c_str(), get_cpu, "ops/s");
    if (get_cpu > 0 && mset_cpu > 0) {
      figure(("ratio_master_locate_vs_redis_get_per_cpu" + suffix).c_str(), locate_cpu / get_cpu, "ratio");
      figure(("ratio_master_owner_commit_vs_redis_mset_per_cpu" + suffix).c_str(), owned_cpu / mset_cpu, "ratio");
    }
    if (sets.errors + msets.errors + gets.errors > 0) failed = 1;
  }
  if (failed) std::fprintf(stderr, "master_bench: %s: some requests failed\n", mode);
  return failed;
}

int run_recovery(const options& o) {
  // What an empty master costs, to subtract.
  auto empty_dir = fresh_dir("master-empty");
  auto empty = start_master(o, empty_dir);
  {
    wire_owner w{empty.address};
    (void)w.await(w.request(wire::locate{"nothing"}));
  }
  auto empty_rss = rss_bytes(empty.proc->pid());
  empty.proc.reset();
  std::filesystem::remove_all(empty_dir);

  // A master.db as a master that committed o.objects puts leaves it.
  auto dir = fresh_dir("master-full");
  auto fill_t0 = bench_clock::now();
  {
    auto store = sluice::sqlite_store::open(dir + "/master.db", false);
    if (!store) die(store.error().to_string());
    sluice::master::persistence p{store->get()};
    sluice::master::member owner;
    owner.id = node_id{0xb0b};
    owner.name = "owner-gone";
    owner.address = "127.0.0.1:1";
    owner.capacity_bytes = 1ULL << 40;
    p.member_joined(owner);
    for (std::uint64_t i = 0; i < o.objects; ++i) {
      sluice::master::object_entry e;
      e.version = i + 1;
      e.size = value_size;
      e.holder = owner.id;
      p.object_committed(bench_key(i), e);
    }
    p.versions_used(o.objects + 1);
    if (auto ok = p.sync(); !ok) die(ok.error().to_string());
  }
  double fill_s = std::chrono::duration<double>(bench_clock::now() - fill_t0).count();

  auto t0 = bench_clock::now();
  auto m = start_master(o, dir);
  wire_owner w{m.address};
  auto reply = w.await(w.request(wire::locate{bench_key(o.objects - 1)}));
  double serving_s = std::chrono::duration<double>(bench_clock::now() - t0).count();
  // The holder is down (nobody registered): the answer names it, which
  // shows the key was recovered.
  auto* err = std::get_if<wire::error_reply>(&reply.env.body);
  if (err == nullptr || err->message.find("owner-gone") == std::string::npos) {
    die("the recovered master does not know the last key");
  }
  auto rss = rss_bytes(m.proc->pid());
  m.proc.reset();
  std::filesystem::remove_all(dir);

  double per_object = rss > empty_rss ? static_cast<double>(rss - empty_rss) / static_cast<double>(o.objects) : 0;
  std::printf("recovery: %llu objects written in %.2f s; master serving %.2f s after its start; "
              "%.0f bytes of resident memory per object (%.1f MiB over an empty master)\n",
              static_cast<unsigned long long>(o.objects), fill_s, serving_s, per_object,
              (static_cast<double>(rss) - static_cast<double>(empty_rss)) / (1 << 20));
  if (o.objects == 1'000'000) figure("master_recovery_1m_s", serving_s, "s");
  figure("master_recovery_s", serving_s, "s");
  figure("master_bytes_per_object", per_object, "bytes");
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: master_bench --sluice-bin PATH [--redis-memory HOST:PORT] [--redis-durable HOST:PORT]\n"
               "                    [--seconds N] [--depth N] [--batch N] [--report-depth N] [--objects N]\n"
               "                    [--server-cpu N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    std::string value = argv[++i];
    try {
      if (flag == "--sluice-bin") {
        o.sluice_bin = value;
      } else if (flag == "--redis-memory") {
        o.redis_memory = value;
      } else if (flag == "--redis-durable") {
        o.redis_durable = value;
      } else if (flag == "--seconds") {
        o.seconds = std::stod(value);
      } else if (flag == "--batch") {
        o.batch = std::stoi(value);
      } else if (flag == "--report-depth") {
        o.report_depth = std::stoi(value);
      } else if (flag == "--depth") {
        o.depth = std::stoi(value);
      } else if (flag == "--objects") {
        o.objects = std::stoull(value);
      } else if (flag == "--server-cpu") {
        o.server_cpu = std::stoi(value);
      } else {
        return usage();
      }
    } catch (const std::exception&) {
      return usage();
    }
  }
  if (o.sluice_bin.empty() || o.depth < 1 || o.batch < 1 || o.report_depth < 1 || o.seconds <= 0 || o.objects < 1) {
    return usage();
  }
  int failed = 0;
  failed |= run_throughput(o, true);
  failed |= run_throughput(o, false);
  failed |= run_recovery(o);
  return failed;
}
