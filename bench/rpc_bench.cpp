// rpc_bench: the Sluice side of `bench/run rpc` (docs/benchmarks.md).
//
//   rpc_bench serve --sluice HOST:PORT [--spin-us N]
//       serves "bench/echo" (answers its "data" field), prints "ready",
//       serves until it is killed
//   rpc_bench call --sluice HOST:PORT [--seconds S] [--transport shm|tcp]
//       4 KiB echo: one call at a time (c1), then 8 in flight (c8); prints
//       figure lines rpc_sluice_echo_4k_{c1,c8}_{p50_us,p99_us,calls_per_s,errors};
//       then reads a stream of 4 KiB items (window 16) for as long:
//       rpc_sluice_stream_4k_{items_per_s,errors}. With --transport tcp
//       the caller reaches the owner over TCP, as a client on another
//       host would (the server stays on shared memory): the echo figures
//       are named rpc_sluice_tcp_echo_4k_..., and no stream is read.
//
// The server connects through shared memory, and so does the caller by
// default: a call between two processes on the owner's host. Exit status: 0 when every
// call succeeded, 1 otherwise, 2 for bad usage.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bench/rpc_load.hpp"
#include "sluice/rpc.hpp"

namespace {

constexpr const char* method = "bench/echo";
constexpr const char* stream_method = "bench/stream";

struct options {
  std::string mode;
  std::string address;
  double seconds = 2;
  bool tcp = false;  // the caller's link to the owner
  long spin_us = -1;  // -1: the library's default
};

std::optional<options> parse(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  options o;
  o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--sluice") o.address = argv[i + 1];
    else if (flag == "--seconds") o.seconds = std::atof(argv[i + 1]);
    else if (flag == "--spin-us") o.spin_us = std::atol(argv[i + 1]);
    else if (flag == "--transport" && (std::string{argv[i + 1]} == "tcp" || std::string{argv[i + 1]} == "shm")) {
      o.tcp = std::string{argv[i + 1]} == "tcp";
    } else {
      return std::nullopt;
    }
  }
  if ((o.mode != "serve" && o.mode != "call") || o.address.empty() || o.seconds <= 0 || o.spin_us < -1) {
    return std::nullopt;
  }
  return o;
}

std::unique_ptr<sluice::client> connect(const options& o, const char* name) {
  sluice::client_options c;
  c.transport = o.tcp ? sluice::client_transport::tcp : sluice::client_transport::shared_memory;
  c.name = name;
  auto client = sluice::client::connect(o.address, c);
  if (!client) {
    std::fprintf(stderr, "rpc_bench: %s\n", client.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*client);
}

sluice::serve_options served_options(const options& o) {
  sluice::serve_options s;
  s.max_concurrent = 1024;  // the caller keeps 8 in flight: never the bound
  if (o.spin_us >= 0) s.spin = std::chrono::microseconds{o.spin_us};
  return s;
}

/// Writes payload_for(0), payload_for(1), ... as items until the caller
/// stops reading (cancel, deadline), from a thread of its own.
void stream_items(sluice::rpc_request, sluice::rpc_stream_writer w) {
  std::thread([w = std::move(w)]() mutable {
    for (std::uint64_t n = 0;; ++n) {
      auto payload = rpc_load::payload_for(n);
      sluice::dict_builder item;
      (void)item.add_bytes("data", std::as_bytes(std::span{payload}));
      if (!w.write(item)) return;
    }
  }).detach();
}

int serve(const options& o) {
  auto c = connect(o, "rpc-bench-server");
  auto served = c->rpc().serve(
      method,
      [](const sluice::rpc_request& r) -> sluice::result<sluice::dict_builder> {
        auto* data = r.args().find("data");
        if (data == nullptr) return sluice::fail(sluice::errc::invalid_argument, "no data");
        auto bytes = data->as_bytes();
        if (!bytes) return bytes.error();
        sluice::dict_builder out;
        // Borrowed from the request, which outlives the encoding.
        if (auto ok = out.add_bytes("data", *bytes); !ok) return ok.error();
        return out;
      },
      served_options(o));
  if (served) served = c->rpc().serve_stream(stream_method, stream_items, served_options(o));
  if (!served) {
    std::fprintf(stderr, "rpc_bench: serve: %s\n", served.error().to_string().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) ::pause();
}

sluice::dict_builder args_for(const std::string& payload) {
  sluice::dict_builder d;
  (void)d.add_bytes("data", std::as_bytes(std::span{payload}));
  return d;
}

bool matches(const sluice::result<sluice::rpc_result>& r, std::uint64_t n) {
  if (!r) return false;
  auto* f = r->dict().find("data");
  auto bytes = f != nullptr ? f->as_bytes() : sluice::result<std::span<const std::byte>>{sluice::fail(sluice::errc::not_found, "")};
  return bytes && rpc_load::answer_matches(bytes->data(), bytes->size(), n);
}

/// Keeps `outstanding_c8` calls in flight: each completion (on the
/// client's rpc thread) starts the next call.
struct pipelined {
  sluice::rpc_endpoint& rpc;
  rpc_load::pipeline load;
  std::promise<void> done;
  std::mutex mutex;  // the first calls start on the main thread
  int in_flight = 0;

  void start() {
    std::uint64_t n = 0;
    {
      std::lock_guard guard{mutex};
      n = load.next();
      ++in_flight;
    }
    auto payload = rpc_load::payload_for(n);
    auto started = rpc_load::clock::now();
    rpc.call_async(sluice::rpc_target::any(), method, args_for(payload),
                   [this, n, started](sluice::result<sluice::rpc_result> r) { finish(n, started, matches(r, n)); });
  }
  void finish(std::uint64_t n, rpc_load::clock::time_point started, bool ok) {
    bool again = false;
    bool last = false;
    {
      std::lock_guard guard{mutex};
      --in_flight;
      again = load.finished(n, started, ok);
      last = !again && in_flight == 0;
    }
    if (again) return start();
    if (last) done.set_value();
  }
};

/// Reads the stream's 4 KiB items for `duration` after a warm-up, each
/// checked; prints the items per second. Returns the errors.
std::size_t read_stream(sluice::rpc_endpoint& rpc, rpc_load::clock::duration duration) {
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(duration) + std::chrono::seconds{30};
  auto stream = rpc.call_stream(sluice::rpc_target::any(), stream_method, {}, {.timeout = timeout, .window = 16});
  std::uint64_t n = 0;
  std::size_t errors = 0;
  auto read_one = [&] {
    auto item = stream.next();
    if (!item || !*item || !matches(std::move(**item), n)) return false;
    ++n;
    return true;
  };
  for (int i = 0; i < rpc_load::warmup_calls; ++i) {
    if (!read_one()) return 1;
  }
  auto start = rpc_load::clock::now();
  std::uint64_t first = n;
  while (rpc_load::clock::now() - start < duration) {
    if (!read_one()) {
      ++errors;
      break;
    }
  }
  auto took = std::chrono::duration<double>(rpc_load::clock::now() - start).count();
  stream.cancel();
  rpc_load::print_figure("rpc_sluice_stream_4k_items_per_s", took > 0 ? static_cast<double>(n - first) / took : 0,
                         "items/s");
  rpc_load::print_figure("rpc_sluice_stream_4k_errors", static_cast<double>(errors), "count");
  return errors;
}

int call(const options& o) {
  auto c = connect(o, "rpc-bench-caller");
  auto& rpc = c->rpc();
  // The server announced itself; wait until the registry knows it.
  for (int i = 0; i < 500 && rpc.call(sluice::rpc_target::any(), method, args_for(rpc_load::payload_for(0))).code() ==
                                 sluice::errc::not_found;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  auto duration = std::chrono::duration_cast<rpc_load::clock::duration>(std::chrono::duration<double>(o.seconds));
  auto c1 = rpc_load::run_sequential(
      [&rpc](std::uint64_t n) {
        auto payload = rpc_load::payload_for(n);
        return matches(rpc.call(sluice::rpc_target::any(), method, args_for(payload)), n);
      },
      duration);
  std::string prefix = o.tcp ? "rpc_sluice_tcp" : "rpc_sluice";
  rpc_load::report(prefix + "_echo_4k_c1", c1);
  pipelined p{rpc, rpc_load::pipeline{duration}, {}, {}, 0};
  auto finished = p.done.get_future();
  for (int i = 0; i < rpc_load::outstanding_c8; ++i) p.start();
  finished.wait();
  auto c8 = p.load.result();
  rpc_load::report(prefix + "_echo_4k_c8", c8);
  auto stream_errors = o.tcp ? 0 : read_stream(rpc, duration);
  return c1.errors == 0 && c8.errors == 0 && stream_errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  if (!o) {
    std::fputs("usage: rpc_bench serve --sluice HOST:PORT [--spin-us N]\n"
               "       rpc_bench call --sluice HOST:PORT [--seconds S] [--transport shm|tcp]\n",
               stderr);
    return 2;
  }
  return o->mode == "serve" ? serve(*o) : call(*o);
}
