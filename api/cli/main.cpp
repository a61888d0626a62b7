// sluice: the launcher. See `sluice --help` and docs/cli.md.

#include <cstdio>
#include <exception>

#include <CLI/App.hpp>
#include <CLI/Config.hpp>
#include <CLI/Formatter.hpp>

#include "api/cli/cli.hpp"

int main(int argc, char** argv) {
  // Signals are blocked before any node starts a thread, so only the main
  // thread's sigwait sees SIGINT/SIGTERM and nodes stop in order.
  sluice::cli::block_stop_signals();

  CLI::App app{"sluice: a data-plane runtime for AI systems (a key-value cache across hosts)",
               "sluice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");
  int exit_code = sluice::cli::exit_ok;
  sluice::cli::add_node_commands(app, exit_code);
  sluice::cli::add_kv_commands(app, exit_code);
  sluice::cli::add_status_command(app, exit_code);
  sluice::cli::add_sim_command(app, exit_code);
  sluice::cli::add_rpc_commands(app, exit_code);
  sluice::cli::add_mq_commands(app, exit_code);
  sluice::cli::add_s3_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return sluice::cli::exit_usage;
  }
  return exit_code;
}
