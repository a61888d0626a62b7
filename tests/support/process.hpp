// A child process for multi-process tests: started with arguments, its
// stdout read line by line with timeouts, killed and reaped on
// destruction so a failing test never leaves nodes behind.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

class process {
 public:
  /// Starts `program` with `args`. stdout is captured; stderr goes to
  /// `stderr_path` (or is inherited when empty).
  process(const std::string& program, std::vector<std::string> args, std::string stderr_path = {});
  ~process();
  process(const process&) = delete;
  process& operator=(const process&) = delete;

  /// The next line of stdout, or nothing when none came in time or the
  /// process closed stdout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  /// Everything on stdout until the process closes it (or timeout).
  std::string read_all(std::chrono::milliseconds timeout);

  void signal(int sig);
  /// Waits for the exit; returns the exit code, or 128+signal, or nothing
  /// on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  int pid() const noexcept { return pid_; }

 private:
  int pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

/// Runs `program args...` to completion; returns exit code and stdout.
struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};
run_result run(const std::string& program, std::vector<std::string> args,
               std::chrono::milliseconds timeout = std::chrono::seconds{20});

/// "sluice master: listening on 127.0.0.1:4242 (id …)" → "127.0.0.1:4242".
std::string address_in(const std::string& line);

/// A fresh temporary file path under the build's temp area.
std::string temp_path(const std::string& stem);

}  // namespace sluice::test
