// http_bench: the load bench/run s3 puts on the S3 gateway and on nginx
// serving the same files, and the plain file writes the gateway's PUTs
// are compared with. One keep-alive connection per thread, for a fixed
// time; every byte a GET returns is compared with the file it should be.
//
//   http_bench get HOST:PORT PATH FILE SECONDS CONNECTIONS
//   http_bench put HOST:PORT PATH_PREFIX BYTES SECONDS CONNECTIONS
//   http_bench files DIR BYTES SECONDS WRITERS
//
// Prints one line: `ops N seconds S bytes B` (exit 1 on any error or
// wrong byte).

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "http_bench: %s\n", why.c_str());
  std::exit(1);
}

int connect_to(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) die("not HOST:PORT: " + address);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &found) != 0) {
    die("cannot resolve " + address);
  }
  int fd = ::socket(found->ai_family, found->ai_socktype, 0);
  if (fd < 0 || ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) die("cannot connect to " + address);
  freeaddrinfo(found);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) die("send failed");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

/// One response on a keep-alive connection: its status, and its body into
/// `body` (resized to the body's length).
struct reader {
  int fd;
  std::vector<char> pending;  // bytes read past the last response

  int response(std::vector<char>& body) {
    std::string head;
    for (;;) {
      auto end = std::string_view{pending.data(), pending.size()}.find("\r\n\r\n");
      if (end != std::string_view::npos) {
        head.assign(pending.data(), end + 4);
        pending.erase(pending.begin(), pending.begin() + static_cast<long>(end + 4));
        break;
      }
      if (pending.size() > 64 * 1024) die("response header too large");
      char buffer[16 * 1024];
      auto n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) die("connection closed before a response header");
      pending.insert(pending.end(), buffer, buffer + n);
    }
    int status = 0;
    if (std::sscanf(head.c_str(), "HTTP/1.1 %d", &status) != 1) die("not an HTTP/1.1 response");
    std::size_t length = 0;
    auto at = head.find("\r\nContent-Length:");
    if (at == std::string::npos) at = head.find("\r\ncontent-length:");
    if (at != std::string::npos) length = std::strtoull(head.c_str() + at + 17, nullptr, 10);
    body.resize(length);
    std::size_t have = std::min(length, pending.size());
    std::memcpy(body.data(), pending.data(), have);
    pending.erase(pending.begin(), pending.begin() + static_cast<long>(have));
    while (have < length) {
      auto n = ::recv(fd, body.data() + have, length - have, 0);
      if (n <= 0) die("connection closed mid-body");
      have += static_cast<std::size_t>(n);
    }
    return status;
  }
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) die("cannot read " + path);
  return {std::istreambuf_iterator<char>{in}, {}};
}

struct totals {
  std::atomic<std::uint64_t> ops{0};
  std::atomic<std::uint64_t> bytes{0};
};

template <class Work>
double run_threads(int threads, double seconds, Work work) {
  std::vector<std::thread> pool;
  auto start = clock_type::now();
  auto until = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { work(t, until); });
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

int get_mode(const std::string& address, const std::string& path, const std::string& file, double seconds,
             int connections) {
  auto expected = read_file(file);
  totals sum;
  auto took = run_threads(connections, seconds, [&](int, clock_type::time_point until) {
    reader r{connect_to(address), {}};
    std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + address + "\r\n\r\n";
    std::vector<char> body;
    std::uint64_t ops = 0;
    while (clock_type::now() < until) {
      send_all(r.fd, request.data(), request.size());
      auto status = r.response(body);
      if (status != 200) die("GET " + path + " answered " + std::to_string(status));
      if (body.size() != expected.size() || std::memcmp(body.data(), expected.data(), body.size()) != 0) {
        die("GET " + path + " returned other bytes than " + file);
      }
      ++ops;
    }
    ::close(r.fd);
    sum.ops += ops;
    sum.bytes += ops * expected.size();
  });
  std::printf("ops %llu seconds %.3f bytes %llu\n", static_cast<unsigned long long>(sum.ops.load()), took,
              static_cast<unsigned long long>(sum.bytes.load()));
  return 0;
}

int put_mode(const std::string& address, const std::string& prefix, std::size_t size, double seconds,
             int connections) {
  totals sum;
  auto took = run_threads(connections, seconds, [&](int t, clock_type::time_point until) {
    reader r{connect_to(address), {}};
    std::string value(size, static_cast<char>('a' + t % 26));
    std::vector<char> body;
    std::uint64_t ops = 0;
    while (clock_type::now() < until) {
      std::string request = "PUT " + prefix + std::to_string(t) + "-" + std::to_string(ops) +
                            " HTTP/1.1\r\nHost: " + address + "\r\nContent-Length: " + std::to_string(size) +
                            "\r\n\r\n" + value;
      send_all(r.fd, request.data(), request.size());
      auto status = r.response(body);
      if (status != 200) die("PUT answered " + std::to_string(status) + ": " + std::string{body.begin(), body.end()});
      ++ops;
    }
    ::close(r.fd);
    sum.ops += ops;
    sum.bytes += ops * size;
  });
  std::printf("ops %llu seconds %.3f bytes %llu\n", static_cast<unsigned long long>(sum.ops.load()), took,
              static_cast<unsigned long long>(sum.bytes.load()));
  return 0;
}

int files_mode(const std::string& dir, std::size_t size, double seconds, int writers) {
  totals sum;
  auto took = run_threads(writers, seconds, [&](int t, clock_type::time_point until) {
    std::string value(size, static_cast<char>('a' + t % 26));
    std::uint64_t ops = 0;
    while (clock_type::now() < until) {
      auto path = dir + "/f" + std::to_string(t) + "-" + std::to_string(ops);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) die("cannot create " + path);
      if (::write(fd, value.data(), size) != static_cast<ssize_t>(size) || ::fsync(fd) != 0) die("write failed");
      ::close(fd);
      ++ops;
    }
    sum.ops += ops;
    sum.bytes += ops * size;
  });
  std::printf("ops %llu seconds %.3f bytes %llu\n", static_cast<unsigned long long>(sum.ops.load()), took,
              static_cast<unsigned long long>(sum.bytes.load()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 6 && a[0] == "get") return get_mode(a[1], a[2], a[3], std::stod(a[4]), std::stoi(a[5]));
  if (a.size() == 6 && a[0] == "put") {
    return put_mode(a[1], a[2], std::stoull(a[3]), std::stod(a[4]), std::stoi(a[5]));
  }
  if (a.size() == 5 && a[0] == "files") return files_mode(a[1], std::stoull(a[2]), std::stod(a[3]), std::stoi(a[4]));
  std::fprintf(stderr,
               "usage: http_bench get HOST:PORT PATH FILE SECONDS CONNECTIONS\n"
               "       http_bench put HOST:PORT PATH_PREFIX BYTES SECONDS CONNECTIONS\n"
               "       http_bench files DIR BYTES SECONDS WRITERS\n");
  return 2;
}
