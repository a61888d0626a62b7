#include "runtime/wire/codec_rpc.hpp"

#include <string>

#include "runtime/overloaded.hpp"

namespace sluice::wire {
namespace {

namespace s = schema;

std::string from_text(capnp::Text::Reader text) { return {text.begin(), text.size()}; }

void set_instance(s::RpcInstance::Builder b, const rpc_instance& x) {
  b.setName(x.name);
  b.setClient(x.client.value);
  b.setClientName(x.client_name);
  b.setOwner(x.owner.value);
  b.setOwnerAddress(x.owner_address);
  b.setMaxConcurrent(x.max_concurrent);
  b.setStream(x.stream);
}

rpc_instance read_instance(s::RpcInstance::Reader r) {
  return {from_text(r.getName()),         node_id{r.getClient()}, from_text(r.getClientName()),
          node_id{r.getOwner()},          from_text(r.getOwnerAddress()), r.getMaxConcurrent(),
          r.getStream()};
}

void set_instances(capnp::List<s::RpcInstance>::Builder list, const std::vector<rpc_instance>& xs) {
  for (unsigned i = 0; i < xs.size(); ++i) set_instance(list[i], xs[i]);
}

std::vector<rpc_instance> read_instances(capnp::List<s::RpcInstance>::Reader list) {
  std::vector<rpc_instance> out;
  out.reserve(list.size());
  for (auto i : list) out.push_back(read_instance(i));
  return out;
}

}  // namespace

void set_pool_region(s::PoolRegion::Builder b, const pool_region& r) {
  b.setSegment(r.segment);
  b.setOffset(r.offset);
  b.setLength(r.length);
}

void write_rpc(s::Rpc::Builder b, const rpc& msg) {
  std::visit(overloaded{
                 [&](const rpc_serve& x) {
                   auto r = b.initServe();
                   r.setName(x.name);
                   r.setMaxConcurrent(x.max_concurrent);
                   r.setStream(x.stream);
                 },
                 [&](const rpc_unserve& x) { b.setUnserve(x.name); },
                 [&](const rpc_sync& x) {
                   set_instances(b.initSync(static_cast<unsigned>(x.instances.size())), x.instances);
                 },
                 [&](const rpc_lookup& x) {
                   auto r = b.initLookup();
                   r.setName(x.name);
                   r.setPrefix(x.prefix);
                 },
                 [&](const rpc_instances& x) {
                   set_instances(b.initInstances(static_cast<unsigned>(x.instances.size())), x.instances);
                 },
                 [&](const rpc_call& x) {
                   auto r = b.initCall();
                   r.setMethod(x.method);
                   r.setTarget(x.target.value);
                   r.setRouting(static_cast<std::uint8_t>(x.routing));
                   r.setArgsBuffer(x.args_buffer);
                   r.setCaller(x.caller.value);
                 },
                 [&](const rpc_reply& x) { b.setReply(x.result_buffer); },
                 [&](const rpc_cancel& x) { b.setCancel(x.call); },
                 [&](const rpc_buffer& x) { b.setBuffer(x.size); },
                 [&](const rpc_buffer_reply& x) {
                   auto r = b.initBufferReply();
                   r.setBuffer(x.buffer);
                   set_pool_region(r.initWhere(), x.where);
                 },
                 [&](const rpc_release& x) { b.setRelease(x.buffer); },
             },
             msg.body);
}

result<rpc> read_rpc(s::Rpc::Reader r) {
  using W = s::Rpc::Which;
  switch (r.which()) {
    case W::SERVE: {
      auto x = r.getServe();
      return rpc{rpc_serve{from_text(x.getName()), x.getMaxConcurrent(), x.getStream()}};
    }
    case W::UNSERVE: return rpc{rpc_unserve{from_text(r.getUnserve())}};
    case W::SYNC: return rpc{rpc_sync{read_instances(r.getSync())}};
    case W::LOOKUP: {
      auto x = r.getLookup();
      return rpc{rpc_lookup{from_text(x.getName()), x.getPrefix()}};
    }
    case W::INSTANCES: return rpc{rpc_instances{read_instances(r.getInstances())}};
    case W::CALL: {
      auto x = r.getCall();
      if (x.getRouting() > static_cast<std::uint8_t>(rpc_routing::least_outstanding)) {
        return fail(errc::protocol, "rpc_call with unknown routing " + std::to_string(x.getRouting()));
      }
      return rpc{rpc_call{from_text(x.getMethod()), node_id{x.getTarget()}, static_cast<rpc_routing>(x.getRouting()),
                          x.getArgsBuffer(), node_id{x.getCaller()}}};
    }
    case W::REPLY: return rpc{rpc_reply{r.getReply()}};
    case W::CANCEL: return rpc{rpc_cancel{r.getCancel()}};
    case W::BUFFER: return rpc{rpc_buffer{r.getBuffer()}};
    case W::BUFFER_REPLY: {
      auto x = r.getBufferReply();
      auto w = x.getWhere();
      return rpc{rpc_buffer_reply{x.getBuffer(), pool_region{w.getSegment(), w.getOffset(), w.getLength()}}};
    }
    case W::RELEASE: return rpc{rpc_release{r.getRelease()}};
  }
  return fail(errc::protocol, "unknown rpc message kind " + std::to_string(static_cast<unsigned>(r.which())) +
                                  " (the peer speaks a newer protocol?)");
}

std::string_view rpc_body_name(const rpc_body& b) noexcept {
  static constexpr std::string_view names[] = {"rpc_serve", "rpc_unserve", "rpc_sync",   "rpc_lookup",
                                               "rpc_instances", "rpc_call", "rpc_reply", "rpc_cancel",
                                               "rpc_buffer", "rpc_buffer_reply", "rpc_release"};
  static_assert(std::size(names) == std::variant_size_v<rpc_body>);
  return names[b.index()];
}

}  // namespace sluice::wire
