#include <csignal>
#include <pthread.h>

#include "api/cli/cli.hpp"

namespace sluice::cli {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void block_stop_signals() {
  auto set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void wait_for_stop_signal() {
  auto set = stop_signals();
  int signal = 0;
  sigwait(&set, &signal);
}

}  // namespace sluice::cli
