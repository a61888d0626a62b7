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

int take_stop_signal() {
  auto set = stop_signals();
  timespec none{0, 0};
  int signal = sigtimedwait(&set, nullptr, &none);
  return signal > 0 ? signal : 0;
}

void wait_for_stop_signal() {
  auto set = stop_signals();
  int signal = 0;
  sigwait(&set, &signal);
}

}  // namespace sluice::cli
