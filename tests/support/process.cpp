#include "tests/support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sluice::test {
namespace {

using clock = std::chrono::steady_clock;

std::vector<char*> argv_of(const std::string& program, std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

process::process(const std::string& program, std::vector<std::string> args, std::string stderr_path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  auto argv = argv_of(program, args);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    if (!stderr_path.empty()) {
      int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
    }
    // The test process may block signals; the child must not inherit that.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
}

process::~process() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds{10});
  }
  if (out_fd_ >= 0) close(out_fd_);
}

std::optional<std::string> process::read_line(std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  while (true) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      auto line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    auto n = ::read(out_fd_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string process::read_all(std::chrono::milliseconds timeout) {
  std::string out;
  while (auto line = read_line(timeout)) out += *line + "\n";
  out += buffer_;
  buffer_.clear();
  return out;
}

void process::signal(int sig) {
  if (!status_) ::kill(pid_, sig);
}

std::optional<int> process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  auto deadline = clock::now() + timeout;
  while (clock::now() < deadline) {
    int status = 0;
    auto r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return std::nullopt;
}

run_result run(const std::string& program, std::vector<std::string> args,
               std::chrono::milliseconds timeout) {
  auto err_path = temp_path("stderr");
  run_result out;
  {
    process p{program, std::move(args), err_path};
    out.out = p.read_all(timeout);
    auto code = p.wait(timeout);
    out.exit_code = code ? *code : -1;
  }
  std::ifstream err{err_path};
  std::stringstream text;
  text << err.rdbuf();
  out.err = text.str();
  std::remove(err_path.c_str());
  return out;
}

std::string address_in(const std::string& line) {
  static const std::string marker = "listening on ";
  auto pos = line.find(marker);
  if (pos == std::string::npos) return {};
  auto start = pos + marker.size();
  auto end = line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::string base = dir != nullptr ? dir : "/tmp";
  return base + "/sluice-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + stem;
}

}  // namespace sluice::test
