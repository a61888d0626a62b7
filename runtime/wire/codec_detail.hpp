// Private to runtime/wire: the conversions the codec's source files
// share, between plain values and Cap'n Proto readers and builders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"

namespace sluice::wire::codec_detail {

namespace s = schema;

inline capnp::Data::Reader as_data(const std::string& text) {
  return {reinterpret_cast<const kj::byte*>(text.data()), text.size()};
}

inline std::string from_data(capnp::Data::Reader data) {
  return {reinterpret_cast<const char*>(data.begin()), data.size()};
}

inline std::string from_text(capnp::Text::Reader text) {
  return {text.begin(), text.size()};
}

template <class B>
void set_key_version(B b, const std::string& key, std::uint64_t version) {
  b.setKey(as_data(key));
  b.setVersion(version);
}

inline void set_replica(s::Replica::Builder b, const replica& r) {
  b.setOwner(r.owner.value);
  b.setAddress(r.address);
}

inline replica read_replica(s::Replica::Reader r) {
  return {node_id{r.getOwner()}, from_text(r.getAddress())};
}

inline s::Role to_schema(role r) {
  switch (r) {
    case role::master: return s::Role::MASTER;
    case role::owner: return s::Role::OWNER;
    case role::client: return s::Role::CLIENT;
    case role::unknown: break;
  }
  return s::Role::UNKNOWN;
}

inline role from_schema(s::Role r) {
  switch (r) {
    case s::Role::MASTER: return role::master;
    case s::Role::OWNER: return role::owner;
    case s::Role::CLIENT: return role::client;
    default: return role::unknown;
  }
}

// The cluster's status, members and their links (codec_status.cpp).
void write_status(s::ClusterStatusReply::Builder b, const cluster_status_reply& x);
cluster_status_reply read_status(s::ClusterStatusReply::Reader r);
void write_links(capnp::List<s::LinkState>::Builder list, const std::vector<link_state>& links);
std::vector<link_state> read_links(capnp::List<s::LinkState>::Reader list);

}  // namespace sluice::wire::codec_detail
