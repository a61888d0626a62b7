// mq_reply: the body of an MQ reply, for whoever speaks MQ to the master
// (the public API's producers and consumers, the simulator's workload).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "actors/common/endpoint.hpp"
#include "runtime/wire/messages.hpp"

namespace sluice {

/// The reply's mq body of kind T; the error it carried; or `protocol`
/// when it is another kind.
template <class T>
result<T> mq_reply(result<wire::message>& reply) {
  auto body = reply_body<wire::mq>(reply);
  if (!body) return std::move(body).error();
  if (auto* x = std::get_if<T>(&body->body)) return std::move(*x);
  return error{errc::protocol, "unexpected reply: " + std::string{wire::mq_body_name(body->body)}};
}

}  // namespace sluice
