// sluice status: the members of the cluster, their state and usage.

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "api/cli/cli.hpp"
#include "runtime/units.hpp"
#include "sluice/client.hpp"

namespace sluice::cli {
namespace {

struct status_flags {
  std::string connect = default_connect;
  bool json = false;
  std::string config;
  int timeout_ms = 0;
};

std::string age(std::chrono::microseconds us) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(us.count()) / 1e6 << "s ago";
  return out.str();
}

nlohmann::json links_json(const member_info& m) {
  nlohmann::json links = nlohmann::json::array();
  for (auto& l : m.links) {
    nlohmann::json paths = nlohmann::json::array();
    for (auto& p : l.paths) {
      paths.push_back({{"kind", p.kind},
                       {"health", p.health},
                       {"failures", p.failures},
                       {"retry_in_us", p.retry_in.count()},
                       {"last_error", p.last_error},
                       {"bytes", p.bytes}});
    }
    links.push_back(
        {{"peer", l.peer_id}, {"peer_name", l.peer_name}, {"active", l.active}, {"via", l.via_id}, {"paths", paths}});
  }
  return links;
}

void print_json(const cluster_status& s) {
  nlohmann::json members = nlohmann::json::array();
  for (auto& m : s.members) {
    members.push_back({{"id", m.id},
                       {"role", m.role},
                       {"name", m.name},
                       {"address", m.address},
                       {"state", m.up ? "up" : "down"},
                       {"capacity_bytes", m.capacity_bytes},
                       {"used_bytes", m.used_bytes},
                       {"objects", m.object_count},
                       {"evictions", m.evictions},
                       {"stored_bytes", m.stored_bytes},
                       {"stored_objects", m.stored_objects},
                       {"home_slots", m.home_slots},
                       {"own_commits", m.own_commits},
                       {"under_replicated_puts", m.under_replicated_puts},
                       {"since_heartbeat_us", m.since_heartbeat.count()},
                       {"master_via", m.master_via_id},
                       {"links", links_json(m)}});
  }
  nlohmann::json repair = {{"under_replicated", s.repair.under_replicated},
                           {"without_live_copy", s.repair.without_live_copy},
                           {"copies_in_flight", s.repair.copies_in_flight},
                           {"copies_made", s.repair.copies_made},
                           {"bytes_copied", s.repair.bytes_copied},
                           {"copies_failed", s.repair.copies_failed}};
  nlohmann::json out = {
      {"master", s.master_id}, {"objects", s.object_count}, {"members", members}, {"repair", repair}};
  std::cout << out.dump(2) << "\n";
}

/// A member's name, or its id when the master does not list it.
std::string name_of(const cluster_status& s, const std::string& id) {
  for (auto& m : s.members) {
    if (m.id == id) return m.name;
  }
  return id;
}

/// "tcp down (2 in a row, retry in 1.5s: timeout: ...)", "relay up".
std::string describe_path(const path_info& p) {
  std::string out = p.kind + " " + p.health;
  if (p.bytes > 0) out += " [" + format_size(p.bytes) + "]";
  if (p.health != "down") return out;
  out += " (" + std::to_string(p.failures) + " in a row";
  if (p.retry_in.count() > 0) {
    std::ostringstream retry;
    retry << std::fixed << std::setprecision(1) << static_cast<double>(p.retry_in.count()) / 1e6 << "s";
    out += ", retry in " + retry.str();
  }
  if (!p.last_error.empty()) out += ": " + p.last_error;
  return out + ")";
}

/// How each owner reaches the owners it talked to: one line per pair.
void print_links(const cluster_status& s) {
  bool any = false;
  for (auto& m : s.members) any |= !m.links.empty();
  if (!any) return;
  std::printf("\n%-28s %-28s %-6s %-28s %s\n", "LINK FROM", "TO", "USING", "VIA", "PATHS");
  for (auto& m : s.members) {
    for (auto& l : m.links) {
      std::string paths;
      for (auto& p : l.paths) paths += (paths.empty() ? "" : ", ") + describe_path(p);
      auto to = l.peer_name.empty() ? name_of(s, l.peer_id) : l.peer_name;
      auto via = l.via_id.empty() ? std::string{"-"} : name_of(s, l.via_id);
      std::printf("%-28s %-28s %-6s %-28s %s\n", m.name.c_str(), to.c_str(),
                  l.active.empty() ? "-" : l.active.c_str(), via.c_str(), paths.c_str());
    }
  }
}

void print_table(const cluster_status& s) {
  std::cout << "master " << s.master_id << ", " << s.object_count << " objects, "
            << s.members.size() << " owners\n";
  std::printf("%-28s %-16s %-5s %-22s %8s %11s %11s %9s %5s %s\n", "OWNER", "ID", "STATE", "ADDRESS",
              "OBJECTS", "USED", "CAPACITY", "EVICTIONS", "SLOTS", "HEARTBEAT");
  for (auto& m : s.members) {
    // An owner that reaches the master through another says which.
    auto heard = age(m.since_heartbeat);
    if (!m.master_via_id.empty()) heard += " via " + name_of(s, m.master_via_id);
    std::printf("%-28s %-16s %-5s %-22s %8llu %11s %11s %9llu %5u %s\n", m.name.c_str(), m.id.c_str(),
                m.up ? "up" : "down", m.address.c_str(),
                static_cast<unsigned long long>(m.object_count), format_size(m.used_bytes).c_str(),
                format_size(m.capacity_bytes).c_str(), static_cast<unsigned long long>(m.evictions),
                m.home_slots, heard.c_str());
  }
  auto& r = s.repair;
  std::printf("\nrepair: %llu under-replicated (%llu without a live copy), %llu in flight, "
              "%llu copies made (%s), %llu failed\n",
              static_cast<unsigned long long>(r.under_replicated + r.without_live_copy),
              static_cast<unsigned long long>(r.without_live_copy), static_cast<unsigned long long>(r.copies_in_flight),
              static_cast<unsigned long long>(r.copies_made), format_size(r.bytes_copied).c_str(),
              static_cast<unsigned long long>(r.copies_failed));
  print_links(s);
  std::fflush(stdout);
}

int run_status(const status_flags& f) {
  auto options = cli_client_options(f.config, f.timeout_ms);
  if (!options) {
    std::cerr << "sluice status: " << options.error().to_string() << "\n";
    return exit_usage;
  }
  auto c = client::connect(f.connect, *options);
  if (!c) {
    std::cerr << "sluice status: " << c.error().to_string() << "\n";
    return exit_failed;
  }
  auto s = (*c)->status();
  if (!s) {
    std::cerr << "sluice status: " << s.error().to_string() << "\n";
    return exit_failed;
  }
  if (f.json) {
    print_json(*s);
  } else {
    print_table(*s);
  }
  return exit_ok;
}

}  // namespace

void add_status_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<status_flags>();
  auto* cmd = app.add_subcommand("status", "Show the cluster's members, their state and usage");
  cmd->add_option("--connect", f->connect, "A node's HOST:PORT (an owner or the master)")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print JSON instead of a table");
  cmd->add_option("--timeout-ms", f->timeout_ms,
                  "Deadline in milliseconds (default: [client] request_timeout, 5 s)")
      ->check(CLI::Range(1, 300'000));
  cmd->add_option("--config", f->config, "TOML configuration file ([client] section)")
      ->check(CLI::ExistingFile);
  cmd->callback([f, &exit_code] { exit_code = run_status(*f); });
}

}  // namespace sluice::cli
