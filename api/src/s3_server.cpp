// The S3 server shell: Beast + Asio C++20 coroutines. Everything S3 means
// is decided by s3::gateway; this file moves bytes and keeps the bounds.

#include "api/src/s3_server.hpp"

#include <atomic>
#include <ctime>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "actors/s3/conditions.hpp"
#include "runtime/assert.hpp"

namespace sluice {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

struct s3_server::impl {
  s3::gateway& gateway;
  s3_server_options options;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::string address;
  std::atomic<std::size_t> connections{0};
  std::vector<std::thread> threads;
  /// Where requests that wait on the disk (fsync) run, so that they hold
  /// no I/O thread meanwhile.
  asio::thread_pool disk;

  impl(s3::gateway& g, s3_server_options o)
      : gateway(g),
        options(std::move(o)),
        io(static_cast<int>(options.threads)),
        acceptor(io),
        disk(options.disk_threads) {}
};

namespace {

/// Counts a connection for as long as it is served.
struct connection_slot {
  std::atomic<std::size_t>& count;
  ~connection_slot() { --count; }
};

/// Cancels the connection's pending I/O when its time is up, leaving the
/// socket open so an S3 error can still be written (a Beast tcp_stream
/// would close it). A generation number makes a late expiry of an
/// earlier arming harmless; the shared state outlives the connection
/// for a handler still queued.
class watchdog {
 public:
  explicit watchdog(tcp::socket& socket) : timer_(socket.get_executor()), state_(std::make_shared<state>(&socket)) {}
  ~watchdog() { state_->socket = nullptr; }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  void arm(clock_type::time_point at) {
    auto generation = ++state_->generation;
    state_->fired = false;
    timer_.expires_at(at);
    timer_.async_wait([st = state_, generation](beast::error_code ec) {
      if (ec || st->generation != generation || st->socket == nullptr) return;
      st->fired = true;
      beast::error_code ignored;
      st->socket->cancel(ignored);
    });
  }
  bool fired() const { return state_->fired; }

 private:
  struct state {
    explicit state(tcp::socket* s) : socket(s) {}
    tcp::socket* socket;
    std::uint64_t generation = 0;
    bool fired = false;
  };
  asio::steady_timer timer_;
  std::shared_ptr<state> state_;
};

/// One client connection: its socket and its watchdog.
struct connection {
  tcp::socket socket;
  watchdog dog{socket};
  const s3_server_options& options;

  connection(tcp::socket s, const s3_server_options& o) : socket(std::move(s)), options(o) {}
  bool timed_out(beast::error_code ec) const { return ec == asio::error::operation_aborted && dog.fired(); }
};

/// Each read or write must progress within idle_timeout, and the whole
/// request must end by its deadline.
void expire(connection& c, const s3_server_options& o, clock_type::time_point deadline) {
  c.dog.arm(std::min(clock_type::now() + o.idle_timeout, deadline));
}

s3::request_head head_of(const http::request_parser<http::buffer_body>& parser) {
  const auto& msg = parser.get();
  s3::request_head head{.method = std::string{msg.method_string()}, .target = std::string{msg.target()}};
  for (const auto& field : msg) head.headers.emplace_back(std::string{field.name_string()}, std::string{field.value()});
  if (auto length = parser.content_length()) head.content_length = *length;
  else if (!parser.chunked()) head.content_length = 0;
  return head;
}

template <class Message>
void fill_headers(Message& res, const s3::response& r) {
  for (const auto& [name, value] : r.headers) res.insert(name, value);
  res.set(http::field::server, "sluice");
  res.set(http::field::date, s3::http_date(static_cast<std::int64_t>(std::time(nullptr))));
}

bool bodyless(int status) { return status == 204 || status == 304 || status < 200; }

/// Writes a response without a streamed body. False: the connection broke.
asio::awaitable<bool> write_simple(connection& stream, s3::response& r, bool keep_alive) {
  auto status = static_cast<http::status>(r.status);
  if (r.head) {
    http::response<http::empty_body> res{status, 11};
    fill_headers(res, r);
    if (!bodyless(r.status)) res.content_length(r.content_length);
    res.keep_alive(keep_alive);
    auto [ec, n] = co_await http::async_write(stream.socket, res, use_tuple);
    co_return !ec;
  }
  http::response<http::string_body> res{status, 11};
  fill_headers(res, r);
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive);
  if (!bodyless(r.status)) res.prepare_payload();
  auto [ec, n] = co_await http::async_write(stream.socket, res, use_tuple);
  co_return !ec;
}

/// Streams `r.source` out in chunks. False: the connection broke, or the
/// source failed (once the headers may have gone out, the only honest
/// signal left is to cut the connection).
asio::awaitable<bool> write_streamed(connection& stream, const s3_server_options& o, s3::response& r,
                                     bool keep_alive, clock_type::time_point deadline, std::vector<std::byte>& chunk) {
  http::response<http::buffer_body> res{static_cast<http::status>(r.status), 11};
  fill_headers(res, r);
  res.content_length(r.content_length);
  res.keep_alive(keep_alive);
  res.body().data = nullptr;
  res.body().more = true;
  http::response_serializer<http::buffer_body> sr{res};
  // The header goes out with the first piece of the body (one write for
  // a small object), each later piece on its own.
  for (std::uint64_t left = r.content_length;;) {
    if (left > 0) {
      // Bytes that lie in memory already (the pool's, for a cached chunk)
      // go out from there; the rest is read into `chunk` first.
      auto in_place = r.source->view(static_cast<std::size_t>(left));
      if (!in_place) co_return false;
      const void* data = in_place->data();
      std::size_t n = in_place->size();
      if (n == 0) {
        auto got = r.source->read(chunk);
        if (!got || *got == 0) co_return false;
        data = chunk.data();
        n = *got;
      }
      left -= std::min<std::uint64_t>(n, left);
      res.body().data = const_cast<void*>(data);  // only read: a response body
      res.body().size = n;
    } else {
      res.body().data = nullptr;
      res.body().size = 0;
    }
    res.body().more = left > 0;
    expire(stream, o, deadline);
    auto [ec, written] = co_await http::async_write(stream.socket, sr, use_tuple);
    if (left == 0) co_return !ec || ec == http::error::need_buffer;
    if (ec && ec != http::error::need_buffer) co_return false;
  }
}

asio::awaitable<bool> write_response(connection& stream, const s3_server_options& o, s3::response& r,
                                     bool keep_alive, clock_type::time_point deadline, std::vector<std::byte>& chunk) {
  expire(stream, o, deadline);
  if (r.source && !r.head) co_return co_await write_streamed(stream, o, r, keep_alive, deadline, chunk);
  co_return co_await write_simple(stream, r, keep_alive);
}

/// `f`'s result, as a coroutine that holds `f` itself (a lambda
/// coroutine would hold only a pointer to its closure, which co_spawn
/// moves).
template <class F>
asio::awaitable<std::invoke_result_t<F&>> call_of(F f) {
  co_return f();
}

/// Runs `f` on the disk threads; the coroutine goes on where it was.
template <class F>
asio::awaitable<std::invoke_result_t<F&>> on_disk(s3_server::impl& s, F f) {
  co_return co_await asio::co_spawn(s.disk.get_executor(), call_of(std::move(f)), asio::use_awaitable);
}

/// GET and HEAD read (from the pool or the page cache) and stay on the
/// I/O thread; everything else may wait on the disk.
bool reads_only(const http::request_parser<http::buffer_body>& parser) {
  auto verb = parser.get().method();
  return verb == http::verb::get || verb == http::verb::head;
}

/// Feeds the request body to `sink` and returns the gateway's answer.
asio::awaitable<s3::response> read_body(s3_server::impl& s, connection& stream, beast::flat_buffer& buffer,
                                        http::request_parser<http::buffer_body>& parser, s3::body_sink& sink,
                                        clock_type::time_point deadline, std::vector<std::byte>& chunk) {
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    expire(stream, s.options, deadline);
    auto [ec, n] = co_await http::async_read(stream.socket, buffer, parser, use_tuple);
    if (ec == http::error::need_buffer) ec = {};
    if (stream.timed_out(ec)) {
      co_return s.gateway.shell_error(s3::s3_code::request_timeout,
                                      "Your socket connection to the server was not read from or written to within "
                                      "the timeout period.",
                                      parser.get().target());
    }
    if (ec) {
      auto r = s.gateway.shell_error(s3::s3_code::invalid_request, "The request body is malformed: " + ec.message(),
                                     parser.get().target());
      co_return r;
    }
    auto got = chunk.size() - parser.get().body().size;
    if (got == 0) continue;
    // Named, not a temporary in the co_await: GCC 12 mislays those.
    std::span<const std::byte> piece{chunk.data(), got};
    auto write_piece = [&sink, piece] { return sink.write(piece); };
    auto early = co_await on_disk(s, write_piece);
    if (early) {
      early->close = true;
      co_return std::move(*early);
    }
  }
  auto finish = [&sink] { return sink.finish(); };
  co_return co_await on_disk(s, finish);
}

/// Answers one request whose header was read. False: close the connection.
asio::awaitable<bool> answer(s3_server::impl& s, connection& stream, beast::flat_buffer& buffer,
                             http::request_parser<http::buffer_body>& parser, std::vector<std::byte>& chunk) {
  auto deadline = clock_type::now() + s.options.request_timeout;
  s3::started started;
  if (reads_only(parser)) {
    started = s.gateway.start(head_of(parser));
  } else {
    auto start = [&s, &parser] { return s.gateway.start(head_of(parser)); };
    started = co_await on_disk(s, start);
  }
  s3::response r;
  if (auto* sink = std::get_if<std::unique_ptr<s3::body_sink>>(&started)) {
    if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
      http::response<http::empty_body> go_on{http::status::continue_, 11};
      expire(stream, s.options, deadline);
      if (auto [ec, n] = co_await http::async_write(stream.socket, go_on, use_tuple); ec) co_return false;
    }
    r = co_await read_body(s, stream, buffer, parser, **sink, deadline, chunk);
    // The sink goes before the answer does: whatever it staged and did not
    // commit is gone by the time the client hears back.
    sink->reset();
  } else {
    r = std::move(std::get<s3::response>(started));
    // A body the gateway did not want is left unread: the connection
    // cannot carry another request after it.
    if (!parser.is_done()) r.close = true;
  }
  bool keep_alive = parser.keep_alive() && !r.close;
  bool written = co_await write_response(stream, s.options, r, keep_alive, deadline, chunk);
  co_return written && keep_alive;
}

/// What to say when the header section could not be read; nullopt: nothing.
std::optional<s3::response> header_failure(s3_server::impl& s, beast::error_code ec, bool got_some) {
  if (ec == http::error::header_limit) {
    return s.gateway.shell_error(s3::s3_code::request_header_section_too_large,
                                 "Your request header section exceeds the maximum allowed size (" +
                                     std::to_string(s.options.header_bytes_max) + " bytes).",
                                 "");
  }
  if (!got_some || ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
    return std::nullopt;  // an idle keep-alive connection ending, or the peer gone
  }
  if (ec == beast::error::timeout) {
    return s.gateway.shell_error(s3::s3_code::request_timeout, "The request header did not arrive in time.", "");
  }
  return s.gateway.shell_error(s3::s3_code::invalid_request, "Malformed HTTP request: " + ec.message(), "");
}

asio::awaitable<void> serve(s3_server::impl& s, tcp::socket socket) {
  connection_slot slot{s.connections};
  connection stream{std::move(socket), s.options};
  // Bounded too: a header section, and what one read brings in after it.
  beast::flat_buffer buffer{s.options.header_bytes_max + s.options.chunk_bytes};
  std::vector<std::byte> chunk(s.options.chunk_bytes);
  for (;;) {
    http::request_parser<http::buffer_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(s.options.header_bytes_max));
    // Body sizes are bounded by the gateway, per operation.
    parser.body_limit(boost::none);
    stream.dog.arm(clock_type::now() + s.options.idle_timeout);
    auto [ec, n] = co_await http::async_read_header(stream.socket, buffer, parser, use_tuple);
    if (ec) {
      if (stream.timed_out(ec)) ec = beast::error::timeout;
      if (auto r = header_failure(s, ec, parser.got_some() || buffer.size() > 0)) {
        co_await write_response(stream, s.options, *r, false, clock_type::now() + s.options.idle_timeout, chunk);
      }
      break;
    }
    if (!co_await answer(s, stream, buffer, parser, chunk)) break;
  }
  beast::error_code ignored;
  stream.socket.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> refuse(s3_server::impl& s, tcp::socket socket) {
  connection stream{std::move(socket), s.options};
  std::vector<std::byte> chunk(1);
  auto r = s.gateway.shell_error(s3::s3_code::slow_down,
                                 "Too many connections (at most " + std::to_string(s.options.connections_max) +
                                     "); reduce your request rate.",
                                 "");
  co_await write_response(stream, s.options, r, false, clock_type::now() + s.options.idle_timeout, chunk);
}

asio::awaitable<void> accept_loop(s3_server::impl& s) {
  for (;;) {
    auto [ec, socket] = co_await s.acceptor.async_accept(asio::make_strand(s.io), use_tuple);
    if (ec == asio::error::operation_aborted || !s.acceptor.is_open()) co_return;
    if (ec) continue;  // a connection that failed while being accepted
    // A response goes out as a header write and body writes: with Nagle
    // on, a small body waits for the peer's delayed ACK of the header.
    socket.set_option(tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    if (s.connections.fetch_add(1) >= s.options.connections_max) {
      --s.connections;
      asio::co_spawn(executor, refuse(s, std::move(socket)), asio::detached);
      continue;
    }
    asio::co_spawn(executor, serve(s, std::move(socket)), asio::detached);
  }
}

result<tcp::endpoint> resolve_listen(asio::io_context& io, const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return fail(errc::invalid_argument, "not HOST:PORT: '" + listen + "'");
  }
  auto host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  tcp::resolver resolver{io};
  beast::error_code ec;
  auto found = resolver.resolve(host, listen.substr(colon + 1), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) return fail(errc::invalid_argument, "cannot resolve '" + listen + "': " + ec.message());
  return found.begin()->endpoint();
}

std::string format_endpoint(const tcp::endpoint& e) {
  auto host = e.address().to_string();
  if (e.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(e.port());
}

}  // namespace

result<std::unique_ptr<s3_server>> s3_server::start(s3::gateway& gateway, s3_server_options options) {
  SLUICE_ASSERT(options.threads > 0);
  auto state = std::make_unique<impl>(gateway, std::move(options));
  auto endpoint = resolve_listen(state->io, state->options.listen);
  if (!endpoint) return std::move(endpoint).error();
  beast::error_code ec;
  state->acceptor.open(endpoint->protocol(), ec);
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(*endpoint, ec);
  if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(errc::unavailable, "cannot listen on " + state->options.listen + ": " + ec.message());
  state->address = format_endpoint(state->acceptor.local_endpoint());
  asio::co_spawn(state->io, accept_loop(*state), asio::detached);
  for (std::size_t i = 0; i < state->options.threads; ++i) {
    state->threads.emplace_back([io = &state->io] { io->run(); });
  }
  return std::unique_ptr<s3_server>{new s3_server{std::move(state)}};
}

s3_server::s3_server(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}

s3_server::~s3_server() {
  asio::post(impl_->io, [s = impl_.get()] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
  impl_->io.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->disk.join();
}

const std::string& s3_server::address() const { return impl_->address; }

}  // namespace sluice
