// MD5, hex and base64 as S3 uses them (ETags, Content-MD5).

#include <doctest/doctest.h>

#include <string>

#include "runtime/digest.hpp"

TEST_CASE("digest: md5 of known inputs matches RFC 1321, in one piece or many") {
  CHECK(sluice::to_hex(sluice::md5_of("")) == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(sluice::to_hex(sluice::md5_of("abc")) == "900150983cd24fb0d6963f7d28e17f72");
  sluice::md5_hasher h;
  h.update("a");
  h.update("bc");
  CHECK(sluice::to_hex(h.finish()) == "900150983cd24fb0d6963f7d28e17f72");
}

TEST_CASE("digest: base64 round-trips every length and refuses what is not base64") {
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    auto text = sluice::base64_encode(bytes);
    CHECK(text.size() % 4 == 0);
    CHECK(sluice::base64_decode(text) == bytes);
    bytes += static_cast<char>(i * 37);
  }
  CHECK(sluice::base64_encode("abc") == "YWJj");
  CHECK(sluice::base64_encode("ab") == "YWI=");
  CHECK_FALSE(sluice::base64_decode("YWI").has_value());
  CHECK_FALSE(sluice::base64_decode("Y=Jj").has_value());
  CHECK_FALSE(sluice::base64_decode("YW*j").has_value());
}
