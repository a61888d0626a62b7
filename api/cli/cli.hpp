// The `sluice` launcher: one binary for every role and for operating a
// cluster. Each subcommand lives in its own file and registers itself
// with the CLI11 app.
#pragma once

#include <string>

#include <CLI/App.hpp>

#include "sluice/client.hpp"

namespace sluice::cli {

/// Exit codes: 0 success; 1 the operation failed (a typed error was
/// printed); 2 bad usage or configuration.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

/// Where `sluice kv` and `sluice status` connect unless told otherwise:
/// the owner address `sluice up` binds by default.
inline constexpr const char* default_connect = "127.0.0.1:7070";

/// Each add_* registers a subcommand whose callback stores its exit code
/// in `exit_code`.
void add_node_commands(CLI::App& app, int& exit_code);
void add_kv_commands(CLI::App& app, int& exit_code);
void add_status_command(CLI::App& app, int& exit_code);
void add_sim_command(CLI::App& app, int& exit_code);
void add_rpc_commands(CLI::App& app, int& exit_code);
void add_mq_commands(CLI::App& app, int& exit_code);
void add_s3_command(CLI::App& app, int& exit_code);

/// Options for the launcher's own client: [client] from `config_file`
/// (when given), then `timeout_ms` (when not 0) on top.
result<client_options> cli_client_options(const std::string& config_file, int timeout_ms);

/// Blocks until SIGINT or SIGTERM. REQUIRES: block_stop_signals() ran
/// before any thread started.
void wait_for_stop_signal();
void block_stop_signals();
/// The stop signal (SIGINT or SIGTERM) that arrived since the last call,
/// taken off the pending set; 0 when none did. Never waits.
/// REQUIRES: block_stop_signals() ran.
int take_stop_signal();

}  // namespace sluice::cli
