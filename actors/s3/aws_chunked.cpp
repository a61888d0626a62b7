#include "actors/s3/aws_chunked.hpp"

#include <algorithm>

#include "runtime/assert.hpp"

namespace sluice::s3 {
namespace {

constexpr std::string_view signature_extension = ";chunk-signature=";
constexpr std::size_t signature_hex_chars = 64;
constexpr std::size_t size_hex_digits_max = 16;  // a 64-bit size
constexpr std::string_view empty_sha256_hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

s3_error malformed(std::string what) {
  return {s3_code::invalid_request, "The aws-chunked request body is malformed: " + std::move(what) + "."};
}

s3_error incomplete(std::uint64_t seen, std::uint64_t declared) {
  return {s3_code::incomplete_body, "The aws-chunked body carried " + std::to_string(seen) +
                                        " bytes, not the x-amz-decoded-content-length of " + std::to_string(declared) +
                                        "."};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string chunk_signature(const chunk_chain& chain, std::string_view previous_signature,
                            const sha256_digest& data_sha256) {
  std::string to_sign = "AWS4-HMAC-SHA256-PAYLOAD\n";
  for (std::string_view piece : {std::string_view{chain.amz_date}, std::string_view{chain.scope}, previous_signature,
                                 empty_sha256_hex}) {
    to_sign.append(piece);
    to_sign += '\n';
  }
  to_sign += to_hex(data_sha256);
  auto mac = hmac_sha256(chain.signing_key, to_sign);
  return to_hex(mac);
}

aws_chunked_decoder::aws_chunked_decoder(std::optional<chunk_chain> chain, std::uint64_t payload_bytes,
                                         aws_chunked_limits limits)
    : chain_(std::move(chain)), payload_bytes_(payload_bytes), limits_(limits) {
  if (chain_) previous_signature_ = chain_->seed_signature;
  SLUICE_ASSERT(limits_.header_bytes_max >= size_hex_digits_max + signature_extension.size() + signature_hex_chars + 2);
}

std::optional<s3_error> aws_chunked_decoder::parse_header() {
  // header_ holds the line without its "\r\n".
  std::string_view line = header_;
  auto semicolon = line.find(';');
  auto size_text = line.substr(0, semicolon);
  if (size_text.empty() || size_text.size() > size_hex_digits_max) return malformed("a chunk size is not 1 to 16 hex digits");
  std::uint64_t size = 0;
  for (char c : size_text) {
    int v = hex_value(c);
    if (v < 0) return malformed("a chunk size is not hex");
    size = size * 16 + static_cast<std::uint64_t>(v);
  }
  // Only the signature extension is defined for this payload kind, and it is required.
  auto extension = semicolon == std::string_view::npos ? std::string_view{} : line.substr(semicolon);
  if (!extension.starts_with(signature_extension) ||
      extension.size() != signature_extension.size() + signature_hex_chars ||
      !lower_hex(extension.substr(signature_extension.size()))) {
    return malformed("a chunk header lacks ';chunk-signature=' and 64 hex digits");
  }
  if (size > payload_bytes_ - payload_seen_) {
    return malformed("the chunks carry more than x-amz-decoded-content-length (" + std::to_string(payload_bytes_) +
                     ") bytes");
  }
  claimed_signature_ = std::string{extension.substr(signature_extension.size())};
  data_left_ = size;
  hasher_.emplace();
  header_.clear();
  if (size > 0) {
    state_ = state::data;
    return std::nullopt;
  }
  // The last chunk: its (empty) data is all there is to sign.
  if (auto bad = check_chunk()) return bad;
  if (payload_seen_ != payload_bytes_) return incomplete(payload_seen_, payload_bytes_);
  state_ = state::last_end;
  crlf_seen_ = 0;
  return std::nullopt;
}

std::optional<s3_error> aws_chunked_decoder::check_chunk() {
  SLUICE_ASSERT(hasher_.has_value());
  auto digest = hasher_->finish();
  hasher_.reset();
  if (!chain_) return std::nullopt;
  auto expected = chunk_signature(*chain_, previous_signature_, digest);
  if (!equal_in_constant_time(expected, claimed_signature_)) {
    return s3_error{s3_code::signature_does_not_match,
                    "The chunk signature we calculated does not match the signature you provided (chunk ending at "
                    "payload byte " + std::to_string(payload_seen_) + ")."};
  }
  previous_signature_ = std::move(expected);
  return std::nullopt;
}

aws_chunked_decoder::step aws_chunked_decoder::next(std::span<const std::byte> input) {
  if (input.empty()) return {};
  switch (state_) {
    case state::header: {
      const auto* begin = reinterpret_cast<const char*>(input.data());
      std::string_view text{begin, input.size()};
      auto newline = text.find('\n');
      auto take = newline == std::string_view::npos ? text.size() : newline + 1;
      if (header_.size() + take > limits_.header_bytes_max) {
        return {.consumed = take, .error = malformed("a chunk header is longer than " +
                                                     std::to_string(limits_.header_bytes_max) + " bytes")};
      }
      header_.append(text.substr(0, take));
      if (newline == std::string_view::npos) return {.consumed = take};
      if (header_.size() < 2 || header_[header_.size() - 2] != '\r') {
        return {.consumed = take, .error = malformed("a chunk header does not end in CRLF")};
      }
      header_.resize(header_.size() - 2);
      return {.consumed = take, .error = parse_header()};
    }
    case state::data: {
      auto take = static_cast<std::size_t>(std::min<std::uint64_t>(data_left_, input.size()));
      auto payload = input.first(take);
      hasher_->update(payload);
      data_left_ -= take;
      payload_seen_ += take;
      std::optional<s3_error> bad;
      if (data_left_ == 0) {
        bad = check_chunk();
        state_ = state::data_end;
        crlf_seen_ = 0;
      }
      return {.consumed = take, .payload = payload, .error = bad};
    }
    case state::data_end:
    case state::last_end: {
      char want = crlf_seen_ == 0 ? '\r' : '\n';
      if (static_cast<char>(input[0]) != want) {
        return {.consumed = 1, .error = malformed(state_ == state::data_end ? "chunk data is not followed by CRLF"
                                                                            : "bytes follow the last chunk")};
      }
      if (++crlf_seen_ == 2) state_ = state_ == state::data_end ? state::header : state::done;
      return {.consumed = 1};
    }
    case state::done: return {.consumed = 1, .error = malformed("bytes follow the last chunk")};
  }
  SLUICE_ASSERT(false);
  return {};
}

std::optional<s3_error> aws_chunked_decoder::finish() const {
  // The CRLF after the last chunk is optional: clients differ.
  if (state_ == state::done || (state_ == state::last_end && crlf_seen_ == 0)) return std::nullopt;
  if (state_ == state::last_end) return malformed("the body ends inside the CRLF after the last chunk");
  return incomplete(payload_seen_, payload_bytes_);
}

}  // namespace sluice::s3
