// kv_bench: the same key-value workload against a Sluice owner and against
// Redis, both over TCP, reported side by side.
//
//   kv_bench --sluice HOST:PORT --redis HOST:PORT [--seconds N] [--only sluice|redis]
//
// For each value size (4 KiB, 1 MiB), client count (1, 8) and operation
// (put/SET, get/GET) it runs a warm-up, then measures every operation with
// steady_clock until --seconds pass. Each client is a thread with its own
// connection (its own sluice::client, its own socket) and one request
// outstanding. Every byte a GET returns is checked, after the operation's
// time is taken; the time spent checking is left out of the rates. Output: one human line per run, then
// `figure NAME VALUE UNIT` lines, ending with the Sluice/Redis ratios.
// Exit status: 0 when every operation succeeded, 1 otherwise, 2 for bad usage.
//
// Redis is spoken to with a minimal RESP2 client written here (SET, GET) so
// that both sides pay for one blocking request/reply per operation and no
// client library makes either side look better or worse.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"

namespace {

using sluice::errc;
using sluice::fail;
using sluice::result;
using bench_clock = std::chrono::steady_clock;

// --- limits (one place) --------------------------------------------------

/// Warm-up operations per client before measuring: enough to open lazy
/// links and fault in buffers, short next to the measured run — and at
/// least one pass over the run's keys (see run_client), so the measured
/// run sees each system's steady state (a Sluice owner, for one, asks the
/// master for a key's slot after its first put and commits later puts of
/// it itself).
constexpr std::size_t warmup_ops = 100;
/// A client stops after this many errors in a row instead of spinning on a
/// dead connection.
constexpr std::size_t consecutive_errors_max = 100;
/// Longest RESP status, error or length line accepted from Redis.
constexpr std::size_t redis_line_bytes_max = 4096;
/// Largest RESP bulk string accepted: twice the largest value we store.
constexpr std::int64_t redis_bulk_bytes_max = 2 << 20;
/// Receive buffer for RESP replies; bulk bytes past it go straight to the
/// destination.
constexpr std::size_t redis_buffer_bytes = 64 << 10;

// --- values --------------------------------------------------------------

/// The byte at `offset` of key `key_index`'s value: distinct per key, so a
/// GET that returns another key's bytes is caught.
std::byte pattern_byte(std::size_t key_index, std::size_t offset) {
  return static_cast<std::byte>((key_index * 131 + offset * 7 + 1) & 0xff);
}

std::vector<std::byte> make_value(std::size_t key_index, std::size_t size) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = pattern_byte(key_index, i);
  return out;
}

/// Checks the length and every byte.
bool value_matches(std::span<const std::byte> got, std::span<const std::byte> expected) {
  return got.size() == expected.size() && std::memcmp(got.data(), expected.data(), got.size()) == 0;
}

// --- connections ---------------------------------------------------------

/// One client's connection to the system under test. Not thread safe: one
/// thread, one outstanding request.
class kv_connection {
 public:
  virtual ~kv_connection() = default;
  virtual result<bool> set(const std::string& key, std::span<const std::byte> bytes) = 0;
  /// The value's bytes, valid until the next call on this connection.
  virtual result<std::span<const std::byte>> get(const std::string& key) = 0;
};

class sluice_connection final : public kv_connection {
 public:
  explicit sluice_connection(std::unique_ptr<sluice::client> c) : client_(std::move(c)) {}

  result<bool> set(const std::string& key, std::span<const std::byte> bytes) override {
    auto version = client_->put(key, bytes);
    if (!version) return std::move(version).error();
    return true;
  }

  result<std::span<const std::byte>> get(const std::string& key) override {
    auto v = client_->get(key);
    if (!v) return std::move(v).error();
    last_ = std::move(*v);
    return last_.bytes();
  }

 private:
  std::unique_ptr<sluice::client> client_;
  sluice::value last_;  // keeps the bytes get() returned alive
};

struct host_port {
  std::string host;
  std::string port;
};

std::optional<host_port> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  auto host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host_port{host, text.substr(colon + 1)};
}

result<int> tcp_connect(const host_port& where) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &found); rc != 0) {
    return fail(errc::invalid_argument, "bad address " + where.host + ":" + where.port + ": " +
                                            ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard{found, &::freeaddrinfo};
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(errc::unavailable, std::string{"socket: "} + std::strerror(errno));
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    auto why = std::string{std::strerror(errno)};
    ::close(fd);
    return fail(errc::unavailable, "cannot connect to " + where.host + ":" + where.port + ": " + why);
  }
  int one = 1;  // requests are single small writes: do not wait for Nagle
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/// A RESP2 client for SET and GET over one blocking socket.
class redis_connection final : public kv_connection {
 public:
  explicit redis_connection(int fd) : fd_(fd), in_(redis_buffer_bytes) {}
  ~redis_connection() override { ::close(fd_); }
  redis_connection(const redis_connection&) = delete;
  redis_connection& operator=(const redis_connection&) = delete;

  result<bool> set(const std::string& key, std::span<const std::byte> bytes) override {
    auto head = "*3\r\n$3\r\nSET\r\n" + bulk_header(key.size()) + key + "\r\n" + bulk_header(bytes.size());
    if (auto sent = send_all({as_bytes(head), bytes, as_bytes("\r\n")}); !sent) return sent.error();
    auto line = read_line();
    if (!line) return std::move(line).error();
    if (*line == "+OK") return true;
    return unexpected(*line, "+OK");
  }

  result<std::span<const std::byte>> get(const std::string& key) override {
    auto request = "*2\r\n$3\r\nGET\r\n" + bulk_header(key.size()) + key + "\r\n";
    if (auto sent = send_all({as_bytes(request)}); !sent) return sent.error();
    auto line = read_line();
    if (!line) return std::move(line).error();
    if (*line == "$-1") return fail(errc::not_found, "redis: no value for " + key);
    if (line->empty() || line->front() != '$') return unexpected(*line, "a bulk string");
    std::int64_t size = -1;
    auto [end, ec] = std::from_chars(line->data() + 1, line->data() + line->size(), size);
    if (ec != std::errc{} || end != line->data() + line->size() || size < 0 || size > redis_bulk_bytes_max) {
      return fail(errc::protocol, "redis: bad bulk length line '" + *line + "'");
    }
    bulk_.resize(static_cast<std::size_t>(size) + 2);
    if (auto ok = read_exact(bulk_); !ok) return ok.error();
    if (bulk_[bulk_.size() - 2] != std::byte{'\r'} || bulk_.back() != std::byte{'\n'}) {
      return fail(errc::protocol, "redis: bulk string not followed by CRLF");
    }
    return std::span<const std::byte>{bulk_.data(), static_cast<std::size_t>(size)};
  }

 private:
  static std::string bulk_header(std::size_t size) { return "$" + std::to_string(size) + "\r\n"; }
  static std::span<const std::byte> as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
  }
  static sluice::error unexpected(const std::string& line, const char* wanted) {
    if (!line.empty() && line.front() == '-') return {errc::aborted, "redis replied " + line.substr(1)};
    return {errc::protocol, "redis: expected " + std::string{wanted} + ", got '" + line + "'"};
  }

  result<void> send_all(std::initializer_list<std::span<const std::byte>> parts);
  result<void> fill();
  result<std::string> read_line();
  result<void> read_exact(std::span<std::byte> out);

  int fd_;
  std::vector<char> in_;
  std::size_t in_begin_ = 0;  // unread bytes are in_[in_begin_, in_end_)
  std::size_t in_end_ = 0;
  std::vector<std::byte> bulk_;
};

result<void> redis_connection::send_all(std::initializer_list<std::span<const std::byte>> parts) {
  std::vector<iovec> iov;
  for (auto p : parts) iov.push_back({const_cast<std::byte*>(p.data()), p.size()});
  std::size_t first = 0;
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = iov.size() - first;
    auto n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errc::unavailable, std::string{"redis: send: "} + std::strerror(errno));
    for (auto left = static_cast<std::size_t>(n); left > 0 && first < iov.size();) {
      auto take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return {};
}

/// Reads more bytes into the buffer, moving unread ones to its front.
result<void> redis_connection::fill() {
  if (in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ == in_.size()) return fail(errc::protocol, "redis: reply line too long");
  auto n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
  if (n < 0 && errno == EINTR) return {};
  if (n < 0) return fail(errc::unavailable, std::string{"redis: recv: "} + std::strerror(errno));
  if (n == 0) return fail(errc::unavailable, "redis closed the connection");
  in_end_ += static_cast<std::size_t>(n);
  return {};
}

result<std::string> redis_connection::read_line() {
  for (;;) {
    std::string_view unread{in_.data() + in_begin_, in_end_ - in_begin_};
    if (auto crlf = unread.find("\r\n"); crlf != std::string_view::npos) {
      in_begin_ += crlf + 2;
      return std::string{unread.substr(0, crlf)};
    }
    if (unread.size() > redis_line_bytes_max) return fail(errc::protocol, "redis: reply line too long");
    if (auto ok = fill(); !ok) return ok.error();
  }
}

result<void> redis_connection::read_exact(std::span<std::byte> out) {
  auto buffered = std::min(out.size(), in_end_ - in_begin_);
  std::memcpy(out.data(), in_.data() + in_begin_, buffered);
  in_begin_ += buffered;
  for (std::size_t done = buffered; done < out.size();) {
    auto n = ::recv(fd_, out.data() + done, out.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errc::unavailable, std::string{"redis: recv: "} + std::strerror(errno));
    if (n == 0) return fail(errc::unavailable, "redis closed the connection mid-reply");
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// --- the workload --------------------------------------------------------

enum class op_kind { get, set };

struct scenario {
  op_kind op;
  std::size_t value_bytes;
  std::string size_name;  // "4k", "1m"
  std::size_t key_count;
  std::size_t clients;
};

/// Keys and their values, shared read-only by every client of a run.
struct data_set {
  std::vector<std::string> keys;
  std::vector<std::vector<std::byte>> values;
};

data_set make_data_set(const scenario& s) {
  data_set d;
  for (std::size_t i = 0; i < s.key_count; ++i) {
    d.keys.push_back("kv_bench/" + s.size_name + "/" + std::to_string(i));
    d.values.push_back(make_value(i, s.value_bytes));
  }
  return d;
}

struct run_limits {
  bench_clock::duration duration;
};

/// Latency samples kept per client and run (a bound on memory; the run
/// goes on past it, counting operations without sampling them).
constexpr std::size_t samples_max = 4'000'000;

struct client_tally {
  std::vector<std::int64_t> latencies_ns;
  std::size_t ops = 0;
  std::size_t errors = 0;
  std::string first_error;
  bench_clock::time_point start, end;
  bench_clock::duration checking{};  // spent checking what gets returned
};

/// What one operation did: its error text (empty on success) and, for a
/// get, the bytes it returned (valid until the next call on the connection).
struct op_outcome {
  std::string error;
  std::span<const std::byte> got;
};

op_outcome do_op(kv_connection& c, const scenario& s, const data_set& d, std::size_t key_index) {
  if (s.op == op_kind::set) {
    auto r = c.set(d.keys[key_index], d.values[key_index]);
    return {r ? std::string{} : r.error().to_string(), {}};
  }
  auto r = c.get(d.keys[key_index]);
  if (!r) return {r.error().to_string(), {}};
  return {{}, *r};
}

/// The operation's error, or a get's wrong bytes; empty when it is right.
std::string check_op(const scenario& s, const data_set& d, std::size_t key_index, const op_outcome& out) {
  if (!out.error.empty() || s.op == op_kind::set) return out.error;
  if (value_matches(out.got, d.values[key_index])) return {};
  return "wrong bytes for " + d.keys[key_index] + " (" + std::to_string(out.got.size()) + " bytes)";
}

client_tally run_client(kv_connection& c, const scenario& s, const data_set& d, const run_limits& limits,
                        std::size_t index, std::latch& ready) {
  client_tally t;
  // Clients start at different keys so concurrent ones rarely collide.
  std::size_t key = index * (s.key_count / s.clients + 1);
  // Warm-up stops at the first error: the measured loop counts errors and
  // is bounded by the deadline; this one is not.
  auto warmup = std::max(warmup_ops, s.key_count);
  for (std::size_t i = 0; i < warmup; ++i, ++key) {
    auto k = key % s.key_count;
    if (!check_op(s, d, k, do_op(c, s, d, k)).empty()) break;
  }
  ready.arrive_and_wait();
  t.start = bench_clock::now();
  auto deadline = t.start + limits.duration;
  std::size_t errors_in_a_row = 0;
  auto now = t.start;
  while (now < deadline && errors_in_a_row < consecutive_errors_max) {
    auto k = key++ % s.key_count;
    auto out = do_op(c, s, d, k);
    auto after = bench_clock::now();
    // Every byte a get returned is checked, outside the operation's time.
    auto error = check_op(s, d, k, out);
    auto checked = bench_clock::now();
    t.checking += checked - after;
    if (error.empty()) {
      ++t.ops;
      if (t.latencies_ns.size() < samples_max) t.latencies_ns.push_back(std::chrono::nanoseconds{after - now}.count());
      errors_in_a_row = 0;
    } else {
      if (t.errors++ == 0) t.first_error = error;
      ++errors_in_a_row;
    }
    now = checked;
  }
  t.end = now;
  return t;
}

struct run_summary {
  std::size_t ops = 0;
  std::size_t errors = 0;
  double seconds = 0;
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::string first_error;
};

run_summary summarize(std::vector<client_tally>& tallies) {
  run_summary r;
  std::vector<std::int64_t> all;
  auto start = tallies.front().start;
  auto end = tallies.front().end;
  for (auto& t : tallies) {
    all.insert(all.end(), t.latencies_ns.begin(), t.latencies_ns.end());
    r.errors += t.errors;
    if (r.first_error.empty()) r.first_error = t.first_error;
    start = std::min(start, t.start);
    end = std::max(end, t.end);
  }
  // The run's time less the time its clients spent checking bytes (they
  // check side by side: the mean of theirs).
  bench_clock::duration checking{};
  for (auto& t : tallies) {
    r.ops += t.ops;
    checking += t.checking;
  }
  checking /= static_cast<std::int64_t>(tallies.size());
  r.seconds = std::chrono::duration<double>(end - start - checking).count();
  r.ops_per_s = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  auto at = [&all](std::size_t percent) { return all[std::min(all.size() - 1, all.size() * percent / 100)]; };
  r.p50_us = static_cast<double>(at(50)) / 1000.0;
  r.p99_us = static_cast<double>(at(99)) / 1000.0;
  return r;
}

using connector = std::function<result<std::unique_ptr<kv_connection>>()>;

/// Stores every key once so GETs find them.
result<void> preload(kv_connection& c, const data_set& d) {
  for (std::size_t i = 0; i < d.keys.size(); ++i) {
    if (auto r = c.set(d.keys[i], d.values[i]); !r) return r.error();
  }
  return {};
}

result<run_summary> run_scenario(const connector& connect, const scenario& s, const run_limits& limits) {
  auto d = make_data_set(s);
  std::vector<std::unique_ptr<kv_connection>> conns;
  for (std::size_t i = 0; i < s.clients; ++i) {
    auto c = connect();
    if (!c) return std::move(c).error();
    conns.push_back(std::move(*c));
  }
  if (s.op == op_kind::get) {
    if (auto ok = preload(*conns.front(), d); !ok) return ok.error();
  }
  std::vector<client_tally> tallies(s.clients);
  std::latch ready{static_cast<std::ptrdiff_t>(s.clients)};
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < s.clients; ++i) {
      threads.emplace_back([&, i] { tallies[i] = run_client(*conns[i], s, d, limits, i, ready); });
    }
  }
  return summarize(tallies);
}

// --- reporting -----------------------------------------------------------

struct system_under_test {
  std::string figure_prefix;  // "kv_tcp", "redis"
  std::string set_name;       // "put", "set"
  connector connect;
};

std::string run_name(const system_under_test& sut, const scenario& s) {
  auto op = s.op == op_kind::get ? std::string{"get"} : sut.set_name;
  return sut.figure_prefix + "_" + op + "_" + s.size_name + (s.clients > 1 ? "_c" + std::to_string(s.clients) : "");
}

void print_figure(const std::string& name, double value, const char* unit) {
  // Whole numbers from 100 up; three significant digits below (ratios).
  if (value >= 100) std::printf("figure %s %.0f %s\n", name.c_str(), value, unit);
  else std::printf("figure %s %.3g %s\n", name.c_str(), value, unit);
}

void report(const std::string& name, const run_summary& r) {
  std::printf("%-22s %8zu ops in %.2f s: %9.0f ops/s, p50 %8.1f us, p99 %8.1f us, %zu errors%s%s\n",
              name.c_str(), r.ops, r.seconds, r.ops_per_s, r.p50_us, r.p99_us, r.errors,
              r.errors ? " (first: " : "", r.errors ? (r.first_error + ")").c_str() : "");
  print_figure(name + "_p50_us", r.p50_us, "us");
  print_figure(name + "_p99_us", r.p99_us, "us");
  print_figure(name + "_ops_per_s", r.ops_per_s, "ops/s");
  print_figure(name + "_errors", static_cast<double>(r.errors), "count");
  std::fflush(stdout);
}

std::vector<scenario> all_scenarios() {
  std::vector<scenario> out;
  // 1024 keys of 4 KiB (4 MiB) and 32 of 1 MiB (32 MiB): both fit any
  // cache many times over, so neither side evicts or swaps.
  for (auto [bytes, size_name, keys] : {std::tuple{std::size_t{4} << 10, "4k", std::size_t{1024}},
                                        std::tuple{std::size_t{1} << 20, "1m", std::size_t{32}}}) {
    for (std::size_t clients : {1, 8}) {
      for (auto op : {op_kind::set, op_kind::get}) out.push_back({op, bytes, size_name, keys, clients});
    }
  }
  return out;
}

// --- command line --------------------------------------------------------

struct options {
  std::string sluice_address;
  std::string redis_address;
  double seconds = 2;
  std::string only;
  /// Only the runs of these names (e.g. kv_tcp_get_4k); empty: all.
  std::set<std::string> runs;
};

constexpr const char* usage =
    "usage: kv_bench --sluice HOST:PORT --redis HOST:PORT [--seconds N] [--only sluice|redis] [--run NAME,...]\n"
    "  --seconds N   measured seconds per run (default 2; a fraction is fine)\n"
    "  --run NAMES   only these runs, by the names the figures start with (kv_tcp_get_4k,redis_get_4k_c8)\n";

std::optional<options> parse_options(int argc, char** argv) {
  options o;
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") return std::nullopt;
    if (i + 1 >= argc || flag.rfind("--", 0) != 0) return std::nullopt;
    flags[flag] = argv[i + 1];
  }
  for (auto& [flag, text] : flags) {
    if (flag == "--sluice") o.sluice_address = text;
    else if (flag == "--redis") o.redis_address = text;
    else if (flag == "--only") o.only = text;
    else if (flag == "--seconds") o.seconds = std::atof(text.c_str());
    else if (flag == "--run") {
      for (std::size_t at = 0; at <= text.size();) {
        auto comma = std::min(text.find(',', at), text.size());
        if (comma > at) o.runs.insert(text.substr(at, comma - at));
        at = comma + 1;
      }
    }
    else return std::nullopt;
  }
  bool only_ok = o.only.empty() || o.only == "sluice" || o.only == "redis";
  bool need_sluice = o.only != "redis", need_redis = o.only != "sluice";
  if (!only_ok || o.seconds <= 0 || o.seconds > 3600) return std::nullopt;
  if ((need_sluice && o.sluice_address.empty()) || (need_redis && o.redis_address.empty())) return std::nullopt;
  return o;
}

std::vector<system_under_test> systems(const options& o) {
  std::vector<system_under_test> out;
  if (o.only != "redis") {
    // kv_shm: a client on the owner's host, through shared memory.
    // kv_tcp: the same owner over TCP: the remote-client path.
    for (auto [prefix, via] : {std::pair{"kv_shm", sluice::client_transport::shared_memory},
                               std::pair{"kv_tcp", sluice::client_transport::tcp}}) {
      out.push_back({prefix, "put", [address = o.sluice_address, via]() -> result<std::unique_ptr<kv_connection>> {
                       sluice::client_options options;
                       options.transport = via;
                       auto c = sluice::client::connect(address, options);
                       if (!c) return std::move(c).error();
                       return std::unique_ptr<kv_connection>{new sluice_connection{std::move(*c)}};
                     }});
    }
  }
  if (o.only != "sluice") {
    auto where = parse_host_port(o.redis_address);
    out.push_back({"redis", "set", [where]() -> result<std::unique_ptr<kv_connection>> {
                     if (!where) return fail(errc::invalid_argument, "--redis wants HOST:PORT");
                     auto fd = tcp_connect(*where);
                     if (!fd) return std::move(fd).error();
                     return std::unique_ptr<kv_connection>{new redis_connection{*fd}};
                   }});
  }
  return out;
}

/// Sluice ops/s ÷ Redis ops/s for every run both systems did.
void print_ratios(const std::map<std::string, double>& ops_per_s) {
  for (auto& [name, sluice_ops] : ops_per_s) {
    if (name.rfind("kv_tcp_", 0) != 0 && name.rfind("kv_shm_", 0) != 0) continue;
    auto rest = name.substr(std::string{"kv_tcp_"}.size());
    auto peer = "redis_" + (rest.rfind("put_", 0) == 0 ? "set_" + rest.substr(4) : rest);
    auto it = ops_per_s.find(peer);
    if (it == ops_per_s.end() || it->second <= 0) continue;
    print_figure(name + "_vs_redis", sluice_ops / it->second, "ratio");
  }
}

/// The local path (a client on the owner's host, shared memory) under the
/// short names the targets in docs/benchmarks.md use, 4 KiB, one client.
void print_headline(const std::map<std::string, double>& ops_per_s, const std::map<std::string, double>& p50_us) {
  if (auto p50 = p50_us.find("kv_shm_get_4k"); p50 != p50_us.end()) print_figure("kv_get_4k_p50_us", p50->second, "us");
  for (auto [op, peer] : {std::pair{"get", "redis_get_4k"}, std::pair{"put", "redis_set_4k"}}) {
    auto ours = ops_per_s.find(std::string{"kv_shm_"} + op + "_4k");
    auto theirs = ops_per_s.find(peer);
    if (ours == ops_per_s.end() || theirs == ops_per_s.end() || theirs->second <= 0) continue;
    print_figure(std::string{"kv_"} + op + "_4k_vs_redis", ours->second / theirs->second, "ratio");
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto o = parse_options(argc, argv);
  if (!o) {
    std::fputs(usage, stderr);
    return 2;
  }
  run_limits limits{std::chrono::duration_cast<bench_clock::duration>(std::chrono::duration<double>(o->seconds))};
  std::map<std::string, double> ops_per_s;
  std::map<std::string, double> p50_us;
  bool clean = true;
  // Runs alternate between the systems, scenario by scenario, so a slow
  // drift of the machine affects both alike.
  for (const auto& s : all_scenarios()) {
    for (const auto& sut : systems(*o)) {
      auto name = run_name(sut, s);
      if (!o->runs.empty() && !o->runs.contains(name)) continue;
      auto r = run_scenario(sut.connect, s, limits);
      if (!r) {
        std::fprintf(stderr, "kv_bench: %s: %s\n", name.c_str(), r.error().to_string().c_str());
        return 1;
      }
      report(name, *r);
      ops_per_s[name] = r->ops_per_s;
      p50_us[name] = r->p50_us;
      clean = clean && r->errors == 0;
    }
  }
  print_ratios(ops_per_s);
  print_headline(ops_per_s, p50_us);
  return clean ? 0 : 1;
}
