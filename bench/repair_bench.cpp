// repair_bench: how fast repair restores lost copies, against a plain copy
// of the same bytes over the same kind of link, and what it does to
// foreground reads.
//
// One round: a master and three owners (`sluice` processes on the server
// CPU), N MiB of 1 MiB values with two copies each put through owner A
// (so A holds one copy of every value, B and C the others), and 4 KiB
// values on B that a foreground reader gets through B for the whole
// round. A is SIGKILLed; the master counts its copies lost after
// [master] repair_after and B and C copy the values between them. The
// repair time runs from the first status that shows the objects below
// their target to the first that shows every copy made. Then every value
// is read back through C and every byte checked. The plain copy moves
// the same number of bytes over a loopback TCP connection between two
// processes on the same CPU, 1 MiB at a time, the receiver writing them
// into fresh shared memory of the whole size (as repair writes into pool
// pages no value used yet: both pay for touching new memory).
//
//   repair_bench --sluice-bin PATH [--mib N] [--server-cpu K]
//
// The master runs with repair_rate and repair_concurrency raised (64 GiB/s
// and 8): the figure is what repair can do, not its default pace
// (256 MiB/s; docs/concepts.md, "Repair").

#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "tests/support/process.hpp"

namespace {

using namespace std::chrono_literals;
using bench_clock = std::chrono::steady_clock;
constexpr std::size_t value_bytes = 1u << 20;
constexpr std::size_t small_bytes = 4096;
constexpr int small_keys = 64;

void print_figure(const char* name, double value, const char* unit) {
  std::printf("figure %s %.4g %s\n", name, value, unit);
  std::fflush(stdout);
}

double seconds_since(bench_clock::time_point t0) {
  return std::chrono::duration<double>(bench_clock::now() - t0).count();
}

/// Value i's bytes: its index in every 8-byte word, then the word's
/// offset, so a value read under another key or torn never checks.
void fill(std::byte* out, std::size_t size, std::uint64_t i) {
  for (std::size_t off = 0; off + 8 <= size; off += 8) {
    std::uint64_t w = (i << 32) ^ off;
    std::memcpy(out + off, &w, 8);
  }
}

bool check(const std::byte* in, std::size_t size, std::uint64_t i) {
  for (std::size_t off = 0; off + 8 <= size; off += 8) {
    std::uint64_t w;
    std::memcpy(&w, in + off, 8);
    if (w != ((i << 32) ^ off)) return false;
  }
  return true;
}

struct options {
  std::string sluice_bin;
  int mib = 2048;
  int server_cpu = -1;
};

struct node {
  std::unique_ptr<sluice::test::process> proc;
  std::string address;
};

std::string write_file(const std::string& text) {
  auto path = sluice::test::temp_path("repair-bench.toml");
  std::ofstream(path) << text;
  return path;
}

node start(const options& o, std::vector<std::string> args) {
  std::string program = o.sluice_bin;
  if (o.server_cpu >= 0) {
    program = "/usr/bin/taskset";
    args.insert(args.begin(), {"-c", std::to_string(o.server_cpu), o.sluice_bin});
  }
  node n;
  n.proc = std::make_unique<sluice::test::process>(program, args, sluice::test::temp_path("repair-bench.log"));
  auto line = n.proc->read_line(10s);
  if (line) n.address = sluice::test::address_in(*line);
  if (n.address.empty()) {
    std::fprintf(stderr, "repair_bench: %s did not start\n", args.front().c_str());
    std::exit(1);
  }
  return n;
}

std::unique_ptr<sluice::client> connect(const std::string& address) {
  sluice::client_options co;
  co.timeout = 30s;
  auto c = sluice::client::connect(address, co);
  if (!c) {
    std::fprintf(stderr, "repair_bench: connect %s: %s\n", address.c_str(), c.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*c);
}

template <class Pred>
sluice::cluster_status await(sluice::client& c, Pred pred, std::chrono::seconds limit, const char* what) {
  auto give_up = bench_clock::now() + limit;
  while (true) {
    auto s = c.status();
    if (s && pred(*s)) return *s;
    if (bench_clock::now() > give_up) {
      std::fprintf(stderr, "repair_bench: timed out waiting for %s\n", what);
      std::exit(1);
    }
    std::this_thread::sleep_for(10ms);
  }
}

std::size_t up(const sluice::cluster_status& s) {
  return static_cast<std::size_t>(std::count_if(s.members.begin(), s.members.end(), [](auto& m) { return m.up; }));
}

/// Foreground 4 KiB gets through one owner, for as long as it runs;
/// each get's microseconds go to before or during.
struct reader {
  std::atomic<int> phase{0};  // 0: before, 1: during repair, 2: after, 3: stop
  std::vector<double> before, during;
  std::atomic<bool> bad{false};
  std::thread thread;

  void start(const std::string& address) {
    thread = std::thread([this, address] {
      auto c = connect(address);
      std::uint64_t n = 0;
      while (phase.load() != 3) {
        auto i = n++ % small_keys;
        auto t0 = bench_clock::now();
        auto got = c->get("small/" + std::to_string(i));
        auto us = seconds_since(t0) * 1e6;
        if (!got || got->size() != small_bytes || !check(got->bytes().data(), small_bytes, 1'000'000 + i)) {
          bad = true;
          continue;
        }
        auto p = phase.load();
        if (p == 0) before.push_back(us);
        if (p == 1) during.push_back(us);
      }
    });
  }
};

double p99(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

struct round_result {
  double repair_gib_per_s = 0;
  double p99_before_us = 0;
  double p99_during_us = 0;
};

round_result run_round(const options& o) {
  auto master_config = write_file(
      "[master]\nheartbeat_interval = \"200ms\"\nheartbeat_timeout = \"1s\"\nrepair_after = \"1s\"\n"
      "repair_rate = \"64GiB\"\nrepair_concurrency = 8\n");
  auto capacity = std::to_string(o.mib * 2) + "MiB";  // room for 2 of the 3 owners to hold everything
  auto owner_config = write_file("[owner]\ncapacity = \"" + capacity + "\"\nsegment = \"" + capacity + "\"\ncache_remote = false\n");
  auto master = start(o, {"master", "--in-memory", "--config", master_config, "--listen", "127.0.0.1:0"});
  node owners[3];
  for (auto& n : owners) {
    n = start(o, {"owner", "--config", owner_config, "--master", master.address, "--listen", "127.0.0.1:0"});
  }
  auto a = connect(owners[0].address);
  auto b = connect(owners[1].address);
  auto c = connect(owners[2].address);
  await(*a, [](auto& s) { return up(s) == 3; }, 10s, "three owners");

  std::vector<std::byte> buffer(value_bytes);
  for (int i = 0; i < o.mib; ++i) {
    fill(buffer.data(), value_bytes, static_cast<std::uint64_t>(i));
    auto v = a->put("big/" + std::to_string(i), buffer, sluice::put_options{.replicas = 2});
    if (!v) {
      std::fprintf(stderr, "repair_bench: put big/%d: %s\n", i, v.error().to_string().c_str());
      std::exit(1);
    }
  }
  std::vector<std::byte> small(small_bytes);
  for (int i = 0; i < small_keys; ++i) {
    fill(small.data(), small_bytes, 1'000'000 + static_cast<std::uint64_t>(i));
    if (!b->put("small/" + std::to_string(i), small)) std::exit(1);
  }

  reader r;
  r.start(owners[1].address);
  std::this_thread::sleep_for(1s);
  owners[0].proc->signal(SIGKILL);
  owners[0].proc->wait(5s);
  auto objects = static_cast<std::uint64_t>(o.mib);
  await(*b, [](auto& s) { return s.repair.under_replicated > 0; }, 30s, "repair to start");
  auto t0 = bench_clock::now();
  r.phase = 1;
  auto done = await(*b, [&](auto& s) {
    return s.repair.copies_made >= objects && s.repair.under_replicated == 0 && s.repair.copies_in_flight == 0;
  }, 600s, "repair to finish");
  auto took = seconds_since(t0);
  r.phase = 3;
  r.thread.join();
  if (r.bad) {
    std::fprintf(stderr, "repair_bench: a foreground get returned wrong bytes or failed\n");
    std::exit(1);
  }
  // Every byte of every value, read through C (from its own copy or B's).
  for (int i = 0; i < o.mib; ++i) {
    auto got = c->get("big/" + std::to_string(i));
    if (!got || got->size() != value_bytes || !check(got->bytes().data(), value_bytes, static_cast<std::uint64_t>(i))) {
      std::fprintf(stderr, "repair_bench: big/%d did not read back intact\n", i);
      std::exit(1);
    }
  }
  round_result out;
  out.repair_gib_per_s = static_cast<double>(done.repair.bytes_copied) / took / static_cast<double>(1ULL << 30);
  out.p99_before_us = p99(r.before);
  out.p99_during_us = p99(r.during);
  std::printf("repair: %llu copies (%llu failed and tried again), %.2f GiB in %.2f s; foreground 4 KiB get p99 %.0f us before, %.0f us during (%zu, %zu gets)\n",
              static_cast<unsigned long long>(done.repair.copies_made),
              static_cast<unsigned long long>(done.repair.copies_failed), static_cast<double>(done.repair.bytes_copied) / static_cast<double>(1ULL << 30), took, out.p99_before_us,
              out.p99_during_us, r.before.size(), r.during.size());
  for (auto* n : {&owners[1], &owners[2], &master}) {
    n->proc->signal(SIGTERM);
    n->proc->wait(10s);
  }
  return out;
}

/// GiB/s of `bytes` sent over a loopback TCP connection between this
/// process and a child, 1 MiB at a time, each received into a buffer.
double link_copy(std::uint64_t bytes) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("repair_bench: listen");
    std::exit(1);
  }
  auto child = ::fork();
  if (child == 0) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(1);
    std::vector<std::byte> value(value_bytes);
    std::uint64_t sent = 0;
    std::uint64_t i = 0;
    while (sent < bytes) {
      fill(value.data(), value_bytes, i++);
      std::size_t off = 0;
      while (off < value_bytes) {
        auto n = ::send(s, value.data() + off, value_bytes - off, 0);
        if (n <= 0) ::_exit(1);
        off += static_cast<std::size_t>(n);
      }
      sent += value_bytes;
    }
    ::close(s);
    ::_exit(0);
  }
  int s = ::accept(listener, nullptr, nullptr);
  // Received into fresh shared memory of the whole size, as repair writes
  // into pages of a pool no value used yet: both pay the first touch.
  int fd = ::memfd_create("repair-bench-link", 0);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::perror("repair_bench: memfd");
    std::exit(1);
  }
  auto* region = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (region == MAP_FAILED) {
    std::perror("repair_bench: mmap");
    std::exit(1);
  }
  std::uint64_t got = 0;
  std::uint64_t i = 0;
  bool intact = true;
  auto t0 = bench_clock::now();
  while (got < bytes) {
    std::byte* into = region + got;
    std::size_t off = 0;
    while (off < value_bytes) {
      auto n = ::recv(s, into + off, value_bytes - off, 0);
      if (n <= 0) {
        std::fprintf(stderr, "repair_bench: the plain copy ended early\n");
        std::exit(1);
      }
      off += static_cast<std::size_t>(n);
    }
    intact = intact && check(into, value_bytes, i++);
    got += value_bytes;
  }
  auto took = seconds_since(t0);
  ::munmap(region, bytes);
  ::close(fd);
  ::close(s);
  ::close(listener);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!intact) {
    std::fprintf(stderr, "repair_bench: the plain copy's bytes did not check\n");
    std::exit(1);
  }
  return static_cast<double>(bytes) / took / static_cast<double>(1ULL << 30);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--sluice-bin") o.sluice_bin = argv[i + 1];
    if (flag == "--mib") o.mib = std::max(16, std::atoi(argv[i + 1]));
    if (flag == "--server-cpu") o.server_cpu = std::atoi(argv[i + 1]);
  }
  if (o.sluice_bin.empty()) {
    std::fputs("usage: repair_bench --sluice-bin PATH [--mib N] [--server-cpu K]\n", stderr);
    return 2;
  }
  auto r = run_round(o);
  // The plain copy on the server CPU too, like the owners that copied.
  if (o.server_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.server_cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  auto link = link_copy(static_cast<std::uint64_t>(o.mib) * value_bytes);
  std::printf("plain copy of the same bytes over loopback TCP: %.2f GiB/s\n", link);
  print_figure("repair_gib_per_s", r.repair_gib_per_s, "GiB/s");
  print_figure("repair_link_gib_per_s", link, "GiB/s");
  print_figure("repair_vs_link", r.repair_gib_per_s / link, "ratio");
  print_figure("repair_get_p99_before_us", r.p99_before_us, "us");
  print_figure("repair_get_p99_during_us", r.p99_during_us, "us");
  if (r.p99_before_us > 0) print_figure("repair_get_p99_during_vs_before", r.p99_during_us / r.p99_before_us, "ratio");
  return 0;
}
