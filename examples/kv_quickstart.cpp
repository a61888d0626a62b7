// kv_quickstart: start a one-process Sluice cluster (a master and an
// owner), connect a client to it, and do a short key-value round trip.
//
//   build/examples/kv_quickstart

#include <cstdio>
#include <string>

#include "sluice/client.hpp"
#include "sluice/node.hpp"

int main() {
  // A master and an owner, each its own node, in this process. No config
  // file: every setting has a default. Port 0 picks free ports.
  auto cluster = sluice::local_cluster::start();
  if (!cluster) {
    std::fprintf(stderr, "cannot start the cluster: %s\n", cluster.error().to_string().c_str());
    return 1;
  }
  std::printf("cluster up: owner at %s, master at %s\n", (*cluster)->client_address().c_str(),
              (*cluster)->master_address().c_str());

  // A client over TCP, as another process on this host would connect.
  auto client = sluice::client::connect((*cluster)->client_address());
  if (!client) {
    std::fprintf(stderr, "cannot connect: %s\n", client.error().to_string().c_str());
    return 1;
  }
  auto& kv = **client;

  auto check = [](const char* what, const auto& r) {
    if (!r) {
      std::fprintf(stderr, "%s failed: %s\n", what, r.error().to_string().c_str());
      std::exit(1);
    }
  };

  auto v1 = kv.put("greeting", "hello, sluice");
  check("put", v1);
  std::printf("put    greeting = \"hello, sluice\"  -> version %llu\n",
              static_cast<unsigned long long>(*v1));

  auto got = kv.get("greeting");
  check("get", got);
  std::printf("get    greeting -> \"%s\" (version %llu, %zu bytes)\n", got->to_string().c_str(),
              static_cast<unsigned long long>(got->version()), got->size());

  auto v2 = kv.put("greeting", "hello again");
  check("put", v2);
  std::printf("put    greeting = \"hello again\"    -> version %llu (the last commit wins)\n",
              static_cast<unsigned long long>(*v2));
  got = kv.get("greeting");
  check("get", got);
  std::printf("get    greeting -> \"%s\"\n", got->to_string().c_str());

  auto there = kv.exists("greeting");
  check("exists", there);
  std::printf("exists greeting -> %s\n", *there ? "yes" : "no");

  auto removed = kv.remove("greeting");
  check("remove", removed);
  std::printf("remove greeting -> %s\n", *removed ? "removed" : "was not there");

  auto gone = kv.get("greeting");
  std::printf("get    greeting -> %s\n", gone ? "still there (unexpected)" : gone.error().to_string().c_str());

  auto status = kv.status();
  check("status", status);
  for (auto& m : status->members) {
    std::printf("member %s (%s): %s, %llu objects\n", m.name.c_str(), m.id.c_str(),
                m.up ? "up" : "down", static_cast<unsigned long long>(m.object_count));
  }
  std::printf("done: the round trip worked\n");
  return gone.code() == sluice::errc::not_found ? 0 : 1;
}
