// The S3 gateway's HTTP/1.1 server: the I/O shell around s3::gateway.
// Boost.Beast and Asio live in s3_server.cpp only, so they compile once
// and no header shows them.
//
// Threads: `threads` run the I/O; each connection is served by one
// coroutine on its own strand, so the gateway sees concurrent requests
// from different connections and ordered ones from each. GET and HEAD
// run on those threads (reads of the pool and the page cache); every
// other request, and the bodies of PUTs, on `disk_threads` (fsyncs wait
// there, holding no I/O thread); never in a caller's.
//
// Bounds: connections_max at once (the next is answered 503 SlowDown and
// closed), header_bytes_max per request header section (400
// RequestHeaderSectionTooLarge), request_timeout from the first byte of a
// request to the last of its response, idle_timeout for a keep-alive
// connection between requests and for each read or write to progress.
// Bodies stream both ways in chunk_bytes pieces; an object is never held
// in memory whole.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "actors/s3/gateway.hpp"
#include "sluice/result.hpp"

namespace sluice {

struct s3_server_options {
  std::string listen{"127.0.0.1:9000"};  ///< HOST:PORT; port 0 picks a free one
  std::size_t threads{4};
  std::size_t disk_threads{16};
  std::size_t connections_max{256};
  std::size_t header_bytes_max{16 * 1024};
  std::chrono::milliseconds request_timeout{std::chrono::minutes{15}};
  std::chrono::milliseconds idle_timeout{std::chrono::seconds{30}};
  std::size_t chunk_bytes{256 * 1024};
};

class s3_server {
 public:
  /// Listens and starts serving. `gateway` must outlive the server.
  static result<std::unique_ptr<s3_server>> start(s3::gateway& gateway, s3_server_options options);
  /// Stops accepting, drops open connections, joins the threads.
  ~s3_server();
  s3_server(const s3_server&) = delete;
  s3_server& operator=(const s3_server&) = delete;

  /// The address it listens on, the port resolved: "127.0.0.1:45123".
  const std::string& address() const;

  struct impl;

 private:
  explicit s3_server(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
