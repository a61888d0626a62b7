#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "transports/shm/unix_socket.hpp"

namespace sluice::transport::shm {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span{text.data(), text.size()});
}

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A fresh directory under the system temp dir, removed with its contents.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "sluice-unix-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// An abstract name no other test run uses at the same time.
std::string abstract_name(std::string_view what) {
  static std::atomic<int> counter{0};
  return "@sluice-test-" + std::string{what} + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator{"/proc/self/fd"}) ++count;
  return count;
}

unique_fd memfd_with(std::string_view text) {
  unique_fd fd{::memfd_create("sluice-unix-test", MFD_CLOEXEC)};
  REQUIRE(fd);
  REQUIRE(::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  return fd;
}

template <class Body>
pid_t spawn(Body body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body());  // no doctest, no atexit handlers in the child
  return pid;
}

int exit_code_of(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Sends `count` descriptors with plain sendmsg, past any bound of ours.
void send_raw_fds(int socket, const std::vector<int>& fds) {
  std::vector<std::byte> control(CMSG_SPACE(sizeof(int) * fds.size()));
  char byte = 'x';
  iovec io{&byte, 1};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  REQUIRE(::sendmsg(socket, &message, MSG_NOSIGNAL) == 1);
}

// The child side of the fd-passing test: receive a memfd, map it, check it.
int receive_and_map(const std::string& address) {
  auto socket = unix_socket::connect(address);
  if (!socket) return 1;
  std::byte buffer[64];
  auto message = socket->receive(buffer, 1);
  if (!message || message->fd_count != 1) return 2;
  if (as_text(std::span{buffer, message->bytes}) != "segment") return 3;
  void* mapped = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, message->fds[0].get(), 0);
  if (mapped == MAP_FAILED) return 4;
  const bool seen = std::memcmp(mapped, "hello from the owner", 20) == 0;
  ::munmap(mapped, 4096);
  auto answer = socket->send(as_bytes(seen ? "mapped" : "wrong bytes"));
  return answer ? 0 : 5;
}

TEST_CASE("unix socket: a memfd sent to another process is mapped there with its data") {
  temp_dir dir;
  const std::string address = dir.file("owner.sock");
  auto listener = unix_listener::listen(address);
  REQUIRE(listener.ok());
  const pid_t child = spawn([&] { return receive_and_map(address); });

  auto connection = listener->accept();
  REQUIRE(connection.ok());
  auto peer = connection->peer();
  REQUIRE(peer.ok());
  CHECK(peer->pid == child);
  CHECK(peer->uid == ::getuid());

  unique_fd segment = memfd_with("hello from the owner");
  REQUIRE(::ftruncate(segment.get(), 4096) == 0);
  const int fds[] = {segment.get()};
  REQUIRE(connection->send(as_bytes("segment"), fds).ok());
  std::byte buffer[64];
  auto answer = connection->receive(buffer, 0);
  REQUIRE(answer.ok());
  CHECK(as_text(std::span{buffer, answer->bytes}) == "mapped");
  CHECK(exit_code_of(child) == 0);
}

TEST_CASE("unix socket: more descriptors than expected are refused and closed") {
  auto sockets = unix_socket::pair();
  REQUIRE(sockets.ok());
  auto& [sender, receiver] = *sockets;
  std::vector<unique_fd> owned;
  std::vector<int> fds;
  for (int i = 0; i < 12; ++i) {
    owned.push_back(memfd_with("x"));
    fds.push_back(owned.back().get());
  }
  std::byte buffer[16];

  SUBCASE("send refuses more than the bound") {
    CHECK(sender.send(as_bytes("m"), std::span{fds}.first(unix_fds_max + 1)).code() ==
          errc::invalid_argument);
  }
  SUBCASE("receive closes descriptors beyond what the caller expects") {
    const std::size_t before = open_fd_count();
    REQUIRE(sender.send(as_bytes("m"), std::span{fds}.first(3)).ok());
    CHECK(receiver.receive(buffer, 1).code() == errc::protocol);
    CHECK(open_fd_count() == before);
  }
  SUBCASE("receive treats a truncated descriptor list as an error and leaks nothing") {
    const std::size_t before = open_fd_count();
    send_raw_fds(sender.fd(), fds);  // 12 > unix_fds_max: the kernel truncates
    CHECK(receiver.receive(buffer, unix_fds_max).code() == errc::protocol);
    CHECK(open_fd_count() == before);
  }
  SUBCASE("the expected number of descriptors arrives") {
    REQUIRE(sender.send(as_bytes("m"), std::span{fds}.first(2)).ok());
    auto message = receiver.receive(buffer, 2);
    REQUIRE(message.ok());
    CHECK(message->fd_count == 2);
    CHECK((::fcntl(message->fds[0].get(), F_GETFD) & FD_CLOEXEC) != 0);
  }
}

TEST_CASE("unix socket: a closed peer is detected by peer_closed, receive and send") {
  auto sockets = unix_socket::pair();
  REQUIRE(sockets.ok());
  auto& [a, b] = *sockets;
  CHECK(!b.peer_closed());
  REQUIRE(a.send(as_bytes("last words")).ok());
  { unix_socket gone = std::move(a); }  // closes a
  CHECK(b.peer_closed());
  std::byte buffer[32];
  auto pending = b.receive(buffer, 0);  // what was sent before the close still arrives
  REQUIRE(pending.ok());
  CHECK(as_text(std::span{buffer, pending->bytes}) == "last words");
  CHECK(b.receive(buffer, 0).code() == errc::unavailable);
  CHECK(b.send(as_bytes("anyone?")).code() == errc::unavailable);
}

TEST_CASE("unix socket: an abstract name listens without a file and reports peer credentials") {
  const std::string name = abstract_name("abstract");
  auto listener = unix_listener::listen(name);
  REQUIRE(listener.ok());
  CHECK(!fs::exists(name));
  CHECK(unix_listener::listen(name).code() == errc::conflict);

  auto client = unix_socket::connect(name);
  REQUIRE(client.ok());
  auto server = listener->accept();
  REQUIRE(server.ok());
  auto peer = server->peer();
  REQUIRE(peer.ok());
  CHECK(peer->pid == ::getpid());
  CHECK(peer->uid == ::getuid());
  REQUIRE(client->send(as_bytes("ping")).ok());
  std::byte buffer[8];
  auto message = server->receive(buffer, 0);
  REQUIRE(message.ok());
  CHECK(as_text(std::span{buffer, message->bytes}) == "ping");
  CHECK(unix_socket::connect(abstract_name("nobody")).code() == errc::unavailable);
}

TEST_CASE("unix socket: a stale socket file is replaced, a live listener or other file is not") {
  temp_dir dir;
  const std::string path = dir.file("owner.sock");
  {
    // A listener that died without cleaning up: its file stays behind.
    unique_fd dead{::socket(AF_UNIX, SOCK_SEQPACKET, 0)};
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path.c_str());
    REQUIRE(::bind(dead.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  REQUIRE(fs::exists(path));
  {
    auto listener = unix_listener::listen(path);
    REQUIRE(listener.ok());
    CHECK(unix_listener::listen(path).code() == errc::conflict);  // live: left alone
    CHECK(unix_socket::connect(path).ok());
  }
  CHECK(!fs::exists(path));  // the listener removed its own file

  const std::string regular = dir.file("notes.txt");
  std::ofstream{regular} << "keep me";
  CHECK(unix_listener::listen(regular).code() == errc::conflict);
  CHECK(fs::file_size(regular) == 7);
}

TEST_CASE("unix socket: non-blocking sockets report nothing waiting as a timeout") {
  const std::string name = abstract_name("nonblocking");
  auto listener = unix_listener::listen(name);
  REQUIRE(listener.ok());
  REQUIRE(listener->set_nonblocking(true).ok());
  CHECK(listener->accept().code() == errc::timeout);
  auto client = unix_socket::connect(name);
  REQUIRE(client.ok());
  REQUIRE(client->set_nonblocking(true).ok());
  std::byte buffer[8];
  CHECK(client->receive(buffer, 0).code() == errc::timeout);
}

TEST_CASE("unix socket: malformed messages and addresses are refused") {
  auto sockets = unix_socket::pair();
  REQUIRE(sockets.ok());
  auto& [a, b] = *sockets;
  CHECK(a.send({}).code() == errc::invalid_argument);  // empty would read as "closed"
  const std::vector<std::byte> huge(unix_message_bytes_max + 1);
  CHECK(a.send(huge).code() == errc::invalid_argument);

  REQUIRE(a.send(as_bytes("longer than the buffer")).ok());
  std::byte small[4];
  CHECK(b.receive(small, 0).code() == errc::protocol);
  CHECK(b.receive(small, unix_fds_max + 1).code() == errc::invalid_argument);

  CHECK(unix_listener::listen("").code() == errc::invalid_argument);
  CHECK(unix_listener::listen("@").code() == errc::invalid_argument);
  CHECK(unix_listener::listen("/tmp/" + std::string(200, 'x')).code() == errc::invalid_argument);
}

}  // namespace
}  // namespace sluice::transport::shm
