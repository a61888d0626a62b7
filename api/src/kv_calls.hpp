// What the KV verbs of sluice::client share between their files
// (client.cpp, writable_value.cpp): a request to the client node whose
// answer is converted before the caller sees it, the checks of put
// options, and a put's answer.
#pragma once

#include <cstdint>

#include "actors/common/endpoint.hpp"
#include "api/src/calls.hpp"
#include "sluice/client.hpp"

namespace sluice {

/// through_node, with the answer turned into a T by `convert` first.
template <class T, class Convert>
void call(client::impl& c, wire::body request, shared_bytes payload, call_options options,
          Convert convert, callback<T> done) {
  through_node(c, std::move(request), std::move(payload), effective(c, options),
               [convert = std::move(convert), done = std::move(done)](result<wire::message> reply) {
                 done(convert(reply));
               });
}

/// The condition a put's options ask for, or invalid_argument.
result<wire::put_condition> condition_of(const put_options& o);
/// A put's time to live in ms (0: none).
std::uint64_t ttl_of(const put_options& o);
/// The version a put (or a commit) answered.
result<std::uint64_t> to_version(result<wire::message>& reply);
/// The version and the copies a put (or a commit) answered.
result<put_result> to_put_result(result<wire::message>& reply);

}  // namespace sluice
