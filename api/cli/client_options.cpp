#include "api/cli/cli.hpp"

namespace sluice::cli {

result<client_options> cli_client_options(const std::string& config_file, int timeout_ms) {
  client_options options;
  if (!config_file.empty()) {
    auto loaded = load_client_options(config_file);
    if (!loaded) return loaded;
    options = *loaded;
  }
  options.name = "sluice-cli";
  if (timeout_ms > 0) {
    options.timeout = std::chrono::milliseconds{timeout_ms};
    options.connect_timeout = options.timeout;
  }
  return options;
}

}  // namespace sluice::cli
