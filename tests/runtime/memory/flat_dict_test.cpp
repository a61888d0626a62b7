#include "runtime/memory/flat_dict.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "runtime/rng.hpp"

namespace {

namespace fd = sluice::flat_dict;
using sluice::errc;

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span{v});
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// Encodes `builder` into a fresh 64-byte aligned buffer.
sluice::byte_buffer encode(const sluice::dict_builder& builder) {
  auto buf = sluice::byte_buffer::allocate(builder.encoded_size());
  REQUIRE(builder.encode_into(buf.span()).ok());
  return buf;
}

std::span<const std::byte> whole(const sluice::byte_buffer& buf) {
  return {buf.data(), buf.size()};
}

bool inside(std::span<const std::byte> view, std::span<const std::byte> region) {
  return view.data() >= region.data() && view.data() + view.size() <= region.data() + region.size();
}

void put_u64(std::span<std::byte> buf, std::size_t offset, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) buf[offset + i] = static_cast<std::byte>(value >> (8 * i));
}

std::uint64_t get_u64(std::span<const std::byte> buf, std::size_t offset) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i)
    value |= std::uint64_t{std::to_integer<std::uint8_t>(buf[offset + i])} << (8 * i);
  return value;
}

/// A 64-byte aligned copy of the first `size` bytes of `source` in an
/// allocation of exactly `size` bytes, so AddressSanitizer flags a read
/// even one byte past the end (byte_buffer rounds its allocations up).
class exact_region {
 public:
  exact_region(std::span<const std::byte> source, std::size_t size)
      : data_(static_cast<std::byte*>(::operator new (size == 0 ? 1 : size, std::align_val_t{64}))),
        size_(size) {
    if (size != 0) std::memcpy(data_, source.data(), size);
  }
  ~exact_region() { ::operator delete (data_, std::align_val_t{64}); }
  exact_region(const exact_region&) = delete;
  exact_region& operator=(const exact_region&) = delete;

  std::span<std::byte> span() noexcept { return {data_, size_}; }

 private:
  std::byte* data_;
  std::size_t size_;
};

/// The fixture most tests share: one field of every kind, two tensors.
struct sample {
  std::vector<float> matrix{1, 2, 3, 4, 5, 6};
  std::vector<std::int32_t> counts{7, 8, 9};
  std::string header = "HEAD";
  std::string body = "the body of the message";

  sluice::dict_builder builder() const {
    sluice::dict_builder b;
    REQUIRE(b.add_int64("step", -42).ok());
    REQUIRE(b.add_float64("loss", 0.125).ok());
    REQUIRE(b.add_bool("done", true).ok());
    REQUIRE(b.add_string("model", "llama-7b").ok());
    REQUIRE(b.add_bytes("payload", {sluice::as_bytes(header), sluice::as_bytes(body)}).ok());
    REQUIRE(
        b.add_tensor("matrix", {.dtype = sluice::dtype_float32, .shape = {2, 3}}, bytes_of(matrix))
            .ok());
    REQUIRE(b.add_tensor("counts", {.dtype = sluice::dtype_int32, .shape = {3}}, bytes_of(counts))
                .ok());
    // Last, so a corrupted length can point past the end of the region.
    REQUIRE(b.add_bytes("trailer", sluice::as_bytes(std::string_view{"end"})).ok());
    return b;
  }
};

/// Reads every field through every accessor that fits its kind, so a
/// view with bad bounds shows up (under ASan) as a crash.
std::uint64_t touch_everything(const sluice::dict_view& view) {
  std::uint64_t sum = 0;
  for (const auto& field : view) {
    CHECK(view.find(field.name()) == &field);
    switch (field.kind()) {
      case sluice::field_kind::int64: sum += static_cast<std::uint64_t>(*field.as_int64()); break;
      case sluice::field_kind::float64: sum += std::isnan(*field.as_float64()) ? 1 : 2; break;
      case sluice::field_kind::boolean: sum += *field.as_bool() ? 1 : 0; break;
      case sluice::field_kind::string:
      case sluice::field_kind::bytes: {
        auto bytes = *field.as_bytes();  // named: a range-for over *temporary would dangle
        CHECK(inside(bytes, view.region()));
        for (std::byte b : bytes) sum += std::to_integer<std::uint8_t>(b);
        break;
      }
      case sluice::field_kind::tensor: {
        auto t = *field.as_tensor();
        CHECK(t.element_count() * sluice::itemsize_bytes(t.dtype) == t.data.size());
        CHECK(inside(t.data, view.region()));
        for (std::byte b : t.data) sum += std::to_integer<std::uint8_t>(b);
        for (auto d : t.shape) sum += static_cast<std::uint64_t>(d);
        break;
      }
    }
  }
  return sum;
}

}  // namespace

// ---- round trips -----------------------------------------------------------

TEST_CASE("dict: every field kind round-trips through one region") {
  sample s;
  auto buf = encode(s.builder());
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  CHECK(view->size() == 8);
  CHECK(*view->find("step")->as_int64() == -42);
  CHECK(*view->find("loss")->as_float64() == 0.125);
  CHECK(*view->find("done")->as_bool() == true);
  CHECK(*view->find("model")->as_string() == "llama-7b");
  CHECK(text_of(*view->find("payload")->as_bytes()) == "HEADthe body of the message");

  auto matrix = *view->find("matrix")->as_tensor();
  CHECK(matrix.dtype == sluice::dtype_float32);
  CHECK(std::vector<std::int64_t>(matrix.shape.begin(), matrix.shape.end()) ==
        std::vector<std::int64_t>{2, 3});
  CHECK(std::vector<std::int64_t>(matrix.strides.begin(), matrix.strides.end()) ==
        std::vector<std::int64_t>{3, 1});
  CHECK(matrix.device == sluice::device{});
  REQUIRE(matrix.data.size() == 6 * sizeof(float));
  CHECK(std::memcmp(matrix.data.data(), s.matrix.data(), matrix.data.size()) == 0);

  auto counts = *view->find("counts")->as_tensor();
  CHECK(counts.dtype == sluice::dtype_int32);
  CHECK(std::memcmp(counts.data.data(), s.counts.data(), counts.data.size()) == 0);
  CHECK(counts.info().shape == std::vector<std::int64_t>{3});
}

TEST_CASE("dict: scalar extremes and special floats round-trip exactly") {
  sluice::dict_builder b;
  REQUIRE(b.add_int64("min", std::numeric_limits<std::int64_t>::min()).ok());
  REQUIRE(b.add_int64("max", std::numeric_limits<std::int64_t>::max()).ok());
  REQUIRE(b.add_float64("nan", std::numeric_limits<double>::quiet_NaN()).ok());
  REQUIRE(b.add_float64("neg_zero", -0.0).ok());
  REQUIRE(b.add_bool("no", false).ok());
  REQUIRE(b.add_string("empty", "").ok());
  REQUIRE(b.add_bytes("none", std::span<const std::byte>{}).ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  CHECK(*view->find("min")->as_int64() == std::numeric_limits<std::int64_t>::min());
  CHECK(*view->find("max")->as_int64() == std::numeric_limits<std::int64_t>::max());
  CHECK(std::isnan(*view->find("nan")->as_float64()));
  CHECK(std::signbit(*view->find("neg_zero")->as_float64()));
  CHECK(*view->find("no")->as_bool() == false);
  CHECK(view->find("empty")->as_string()->empty());
  CHECK(view->find("none")->as_bytes()->empty());
}

TEST_CASE("dict: zero-dimensional and empty tensors round-trip") {
  double scalar = 2.5;
  sluice::dict_builder b;
  REQUIRE(b.add_tensor("scalar", {.dtype = sluice::dtype_float64, .shape = {}},
                       std::as_bytes(std::span{&scalar, 1}))
              .ok());
  REQUIRE(b.add_tensor("empty", {.dtype = sluice::dtype_bfloat16, .shape = {4, 0, 3}},
                       std::span<const std::byte>{})
              .ok());
  REQUIRE(b.add_tensor("flags", {.dtype = sluice::dtype_bool, .shape = {2}},
                       sluice::as_bytes(std::string_view{"\x01\x00", 2}))
              .ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto s = *view->find("scalar")->as_tensor();
  CHECK(s.shape.empty());
  CHECK(s.element_count() == 1);
  CHECK(std::memcmp(s.data.data(), &scalar, sizeof scalar) == 0);
  auto e = *view->find("empty")->as_tensor();
  CHECK(e.element_count() == 0);
  CHECK(e.data.empty());
  CHECK(e.dtype == sluice::dtype_bfloat16);
  CHECK(view->find("flags")->as_tensor()->dtype == sluice::dtype_bool);
}

TEST_CASE("dict: an empty dict encodes to just its 64-byte header") {
  sluice::dict_builder b;
  CHECK(b.encoded_size() == fd::header_bytes);
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  CHECK(view->empty());
  CHECK(view->find("anything") == nullptr);
}

TEST_CASE("dict: a bytes field given as three spans reads back as their concatenation") {
  std::string a = "alpha-", b = "beta-", c = "gamma";
  sluice::dict_builder builder;
  std::vector<std::span<const std::byte>> parts{sluice::as_bytes(a), sluice::as_bytes(b),
                                                sluice::as_bytes(c)};
  REQUIRE(builder.add_bytes("joined", parts).ok());
  auto buf = encode(builder);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  CHECK(text_of(*view->find("joined")->as_bytes()) == "alpha-beta-gamma");
}

TEST_CASE("dict: a tensor gathered from a header span and a body span reads back whole") {
  std::vector<std::int16_t> values{1, 2, 3, 4, 5, 6, 7, 8};
  auto all = bytes_of(values);
  sluice::dict_builder b;
  REQUIRE(b.add_tensor("t", {.dtype = sluice::dtype_int16, .shape = {2, 4}},
                       {all.first(6), all.subspan(6)})
              .ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto t = *view->find("t")->as_tensor();
  REQUIRE(t.data.size() == all.size());
  CHECK(std::memcmp(t.data.data(), values.data(), all.size()) == 0);
}

// ---- zero copy and alignment -----------------------------------------------

TEST_CASE("dict: every data view is 64-byte aligned in a 64-byte aligned region") {
  sample s;
  auto buf = encode(s.builder());
  REQUIRE(aligned(buf.data(), 64));
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  int checked = 0;
  for (const auto& field : *view) {
    if (field.kind() == sluice::field_kind::tensor) {
      CHECK(aligned(field.as_tensor()->data.data(), sluice::dict_data_alignment));
      ++checked;
    } else if (field.kind() == sluice::field_kind::bytes ||
               field.kind() == sluice::field_kind::string) {
      CHECK(aligned(field.as_bytes()->data(), sluice::dict_data_alignment));
      ++checked;
    }
  }
  CHECK(checked == 5);
}

TEST_CASE("dict: a tensor field is read back as a view into the region") {
  sample s;
  auto buf = encode(s.builder());
  auto region = whole(buf);
  auto view = sluice::dict_view::parse(region);
  REQUIRE(view.ok());
  auto matrix = *view->find("matrix")->as_tensor();
  auto payload = *view->find("payload")->as_bytes();
  auto model = *view->find("model")->as_string();
  CHECK(inside(matrix.data, region));
  CHECK(inside(payload, region));
  CHECK(inside(sluice::as_bytes(model), region));
  // No copy: a write to the region shows through the view already taken.
  const std::size_t at = static_cast<std::size_t>(matrix.data.data() - region.data());
  float changed = 99;
  std::memcpy(buf.data() + at, &changed, sizeof changed);
  float seen = 0;
  std::memcpy(&seen, matrix.data.data(), sizeof seen);
  CHECK(seen == 99);
}

TEST_CASE("dict: a tensor added as room is laid out, left unwritten and filled in place") {
  sluice::dict_builder b;
  REQUIRE(b.add_int64("step", 7).ok());
  REQUIRE(b.add_tensor_room("kv", {.dtype = sluice::dtype_float32, .shape = {4, 8}}).ok());
  CHECK(b.add_tensor_room("bad", {.dtype = sluice::dtype_float32, .shape = {-1}}).code() == errc::invalid_argument);
  auto buf = sluice::byte_buffer::allocate(b.encoded_size());
  std::memset(buf.data(), 0xAB, buf.size());
  REQUIRE(b.encode_into(buf.span()).ok());
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto kv = *view->find("kv")->as_tensor();
  REQUIRE(kv.data.size() == 4 * 8 * sizeof(float));
  CHECK(inside(kv.data, whole(buf)));
  // Left as it was: encode_into did not write the elements.
  CHECK(std::to_integer<int>(kv.data[0]) == 0xAB);
  CHECK(std::to_integer<int>(kv.data[kv.data.size() - 1]) == 0xAB);
  // Written in place, read back through a fresh parse.
  auto at = static_cast<std::size_t>(kv.data.data() - buf.data());
  float one = 1.5F;
  std::memcpy(buf.data() + at, &one, sizeof one);
  auto again = sluice::dict_view::parse(whole(buf));
  REQUIRE(again.ok());
  float seen = 0;
  std::memcpy(&seen, again->find("kv")->as_tensor()->data.data(), sizeof seen);
  CHECK(seen == 1.5F);
  CHECK(*again->find("step")->as_int64() == 7);
}

TEST_CASE("dict: only Sluice's own builder takes a reserved name, and a single tensor reads back by it") {
  std::vector<std::int32_t> data{1, 2, 3};
  sluice::dict_builder user;
  CHECK(user.add_tensor(sluice::single_tensor_field, {.dtype = sluice::dtype_int32, .shape = {3}}, bytes_of(data))
            .code() == errc::invalid_argument);
  auto own = sluice::dict_reserved::builder();
  REQUIRE(own.add_tensor(sluice::single_tensor_field, {.dtype = sluice::dtype_int32, .shape = {3}}, bytes_of(data))
              .ok());
  // The reserved builder still checks everything else.
  CHECK(own.add_int64("", 1).code() == errc::invalid_argument);
  CHECK(own.add_int64(sluice::single_tensor_field, 1).code() == errc::invalid_argument);  // a repeat
  auto buf = encode(own);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  REQUIRE(view->size() == 1);
  auto t = *view->find(sluice::single_tensor_field)->as_tensor();
  CHECK(t.dtype == sluice::dtype_int32);
  CHECK(std::memcmp(t.data.data(), data.data(), 12) == 0);
}

TEST_CASE("dict: complex64 and complex128 tensors round-trip") {
  std::vector<double> c128{1.0, -2.0, 3.5, 4.25};  // two complex128 numbers
  std::vector<float> c64{1.0F, -2.0F};              // one complex64 number
  sluice::dict_builder b;
  REQUIRE(b.add_tensor("z", {.dtype = sluice::dtype_complex128, .shape = {2}}, bytes_of(c128)).ok());
  REQUIRE(b.add_tensor("w", {.dtype = sluice::dtype_complex64, .shape = {1}}, bytes_of(c64)).ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto z = *view->find("z")->as_tensor();
  CHECK(z.dtype == sluice::dtype_complex128);
  CHECK(sluice::to_string(z.dtype) == "complex128");
  CHECK(sluice::itemsize_bytes(z.dtype) == 16);
  CHECK(std::memcmp(z.data.data(), c128.data(), 32) == 0);
  CHECK(view->find("w")->as_tensor()->dtype == sluice::dtype_complex64);
  CHECK(sluice::to_dlpack(sluice::dtype_complex64).code == kDLComplex);
}

TEST_CASE("dict: fields iterate in the order they were added and are found by name") {
  sample s;
  auto buf = encode(s.builder());
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  std::vector<std::string> order;
  for (const auto& field : *view) order.emplace_back(field.name());
  CHECK(order == std::vector<std::string>{"step", "loss", "done", "model", "payload", "matrix",
                                          "counts", "trailer"});
  CHECK(view->find("matrix")->kind() == sluice::field_kind::tensor);
  CHECK(view->find("missing") == nullptr);
  CHECK(view->find("") == nullptr);
}

TEST_CASE("dict: a moved dict_view keeps its tensor views valid") {
  sample s;
  auto buf = encode(s.builder());
  auto parsed = sluice::dict_view::parse(whole(buf));
  REQUIRE(parsed.ok());
  sluice::dict_view moved = std::move(parsed).value();
  auto t = *moved.find("matrix")->as_tensor();
  CHECK(t.shape.size() == 2);
  CHECK(t.shape[0] == 2);
  CHECK(t.strides[0] == 3);
}

TEST_CASE("dict: an encoding is a pure function of its fields, padding included") {
  sample s;
  auto builder = s.builder();
  auto first = sluice::byte_buffer::allocate(builder.encoded_size());
  auto second = sluice::byte_buffer::allocate(builder.encoded_size());
  std::memset(first.data(), 0xAA, first.size());
  std::memset(second.data(), 0x55, second.size());
  REQUIRE(builder.encode_into(first.span()).ok());
  REQUIRE(builder.encode_into(second.span()).ok());
  CHECK(std::memcmp(first.data(), second.data(), first.size()) == 0);
}

// ---- what the builder refuses ----------------------------------------------

TEST_CASE("dict: a wrong-kind accessor returns invalid_argument naming the field") {
  sample s;
  auto buf = encode(s.builder());
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto wrong = view->find("matrix")->as_int64();
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.code() == errc::invalid_argument);
  CHECK(wrong.error().message() == "field 'matrix' is tensor, not int64");
  CHECK(view->find("step")->as_tensor().code() == errc::invalid_argument);
  CHECK(view->find("payload")->as_string().code() == errc::invalid_argument);
  CHECK(view->find("model")->as_bytes().ok());  // a string's bytes are readable
}

TEST_CASE("dict: empty, reserved, overlong and repeated names are rejected") {
  sluice::dict_builder b;
  CHECK(b.add_int64("", 1).code() == errc::invalid_argument);
  auto reserved = b.add_int64("__meta", 1);
  CHECK(reserved.code() == errc::invalid_argument);
  CHECK(reserved.error().message().find("'__meta'") != std::string::npos);
  CHECK(b.add_int64(std::string(sluice::dict_name_bytes_max + 1, 'n'), 1).code() ==
        errc::invalid_argument);
  CHECK(b.add_int64(std::string(sluice::dict_name_bytes_max, 'n'), 1).ok());
  CHECK(b.add_int64("_single_underscore_is_fine", 1).ok());
  REQUIRE(b.add_int64("x", 1).ok());
  auto again = b.add_string("x", "other");
  CHECK(again.code() == errc::invalid_argument);
  CHECK(again.error().message().find("'x'") != std::string::npos);
  CHECK(b.size() == 3);  // refused fields were not added
}

TEST_CASE("dict: non-contiguous strides are rejected and C-contiguous ones accepted") {
  std::vector<float> data(6);
  sluice::dict_builder b;
  auto fortran = b.add_tensor(
      "f",
      {.dtype = sluice::dtype_float32, .shape = {2, 3}, .strides = std::vector<std::int64_t>{1, 2}},
      bytes_of(data));
  CHECK(fortran.code() == errc::invalid_argument);
  CHECK(fortran.error().message().find("'f'") != std::string::npos);
  CHECK(b.add_tensor("short",
                     {.dtype = sluice::dtype_float32,
                      .shape = {2, 3},
                      .strides = std::vector<std::int64_t>{3}},
                     bytes_of(data))
            .code() == errc::invalid_argument);
  CHECK(b.add_tensor("c",
                     {.dtype = sluice::dtype_float32,
                      .shape = {2, 3},
                      .strides = std::vector<std::int64_t>{3, 1}},
                     bytes_of(data))
            .ok());
  // An extent-1 dimension may carry any stride, as PyTorch exports it.
  CHECK(b.add_tensor("row",
                     {.dtype = sluice::dtype_float32,
                      .shape = {1, 6},
                      .strides = std::vector<std::int64_t>{99, 1}},
                     bytes_of(data))
            .ok());
}

TEST_CASE("dict: unknown dtypes are rejected") {
  std::vector<std::byte> data(8);
  sluice::dict_builder b;
  const sluice::dtype unknown[] = {
      {sluice::dtype_code::complex, 32, 1},         // complex of two float16: not supported
      {static_cast<sluice::dtype_code>(3), 64, 1},  // opaque handle
      {sluice::dtype_code::ieee_float, 8, 1},       // no float8 in this numbering
      {sluice::dtype_code::signed_int, 12, 1},
      {sluice::dtype_code::ieee_float, 32, 2},  // vector lanes
  };
  for (auto type : unknown) {
    auto r = b.add_tensor("t", {.dtype = type, .shape = {1}}, std::span{data}.first(type.bits / 8));
    CHECK(r.code() == errc::invalid_argument);
    CHECK(r.error().message().find("'t'") != std::string::npos);
  }
  CHECK(b.empty());
}

TEST_CASE("dict: a shape that does not match the supplied bytes is rejected") {
  std::vector<float> data(6);
  sluice::dict_builder b;
  auto r = b.add_tensor("m", {.dtype = sluice::dtype_float32, .shape = {2, 4}}, bytes_of(data));
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.error().message() ==
        "field 'm': shape (2, 4) of float32 needs 32 bytes but 24 were given");
  CHECK(b.add_tensor("m", {.dtype = sluice::dtype_float64, .shape = {6}}, bytes_of(data)).code() ==
        errc::invalid_argument);
}

TEST_CASE(
    "dict: negative extents, too many dimensions, huge shapes and non-CPU devices are rejected") {
  std::vector<float> data(1);
  sluice::dict_builder b;
  CHECK(
      b.add_tensor("neg", {.dtype = sluice::dtype_float32, .shape = {-1}}, bytes_of(data)).code() ==
      errc::invalid_argument);
  CHECK(b.add_tensor("deep",
                     {.dtype = sluice::dtype_float32, .shape = std::vector<std::int64_t>(17, 1)},
                     bytes_of(data))
            .code() == errc::invalid_argument);
  CHECK(b.add_tensor("huge", {.dtype = sluice::dtype_float32, .shape = {std::int64_t{1} << 40, 0}},
                     std::span<const std::byte>{})
            .code() == errc::invalid_argument);
  CHECK(
      b.add_tensor(
           "gpu",
           {.dtype = sluice::dtype_float32, .shape = {1}, .device = {sluice::device_type::cuda, 0}},
           bytes_of(data))
          .code() == errc::invalid_argument);
  CHECK(
      b.add_tensor(
           "cpu1",
           {.dtype = sluice::dtype_float32, .shape = {1}, .device = {sluice::device_type::cpu, 1}},
           bytes_of(data))
          .code() == errc::invalid_argument);
  CHECK(b.add_tensor("deep_ok",
                     {.dtype = sluice::dtype_float32, .shape = std::vector<std::int64_t>(16, 1)},
                     bytes_of(data))
            .ok());
}

TEST_CASE("dict: the field count limit is enforced") {
  sluice::dict_builder b;
  for (std::size_t i = 0; i < sluice::dict_fields_max; ++i)
    REQUIRE(b.add_int64("f" + std::to_string(i), 1).ok());
  CHECK(b.add_int64("one_more", 1).code() == errc::invalid_argument);
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  CHECK(view->size() == sluice::dict_fields_max);
  CHECK(*view->find("f1023")->as_int64() == 1);
}

TEST_CASE("dict: encode_into refuses an output of the wrong size or alignment") {
  sample s;
  auto builder = s.builder();
  auto buf = sluice::byte_buffer::allocate(builder.encoded_size() + 64);
  CHECK(builder.encode_into(buf.span()).code() == errc::invalid_argument);
  CHECK(builder.encode_into(buf.span().first(builder.encoded_size() - 1)).code() ==
        errc::invalid_argument);
  CHECK(builder.encode_into(buf.span().subspan(8, builder.encoded_size())).code() ==
        errc::invalid_argument);
  CHECK(builder.encode_into(buf.span().subspan(64, builder.encoded_size())).ok());
}

// ---- what the decoder refuses ----------------------------------------------

TEST_CASE("dict: a decoder rejects a misaligned region with invalid_argument") {
  sample s;
  auto builder = s.builder();
  auto buf = sluice::byte_buffer::allocate(builder.encoded_size() + 64);
  REQUIRE(builder.encode_into(buf.span().first(builder.encoded_size())).ok());
  std::memmove(buf.data() + 8, buf.data(), builder.encoded_size());
  CHECK(sluice::dict_view::parse(buf.span().subspan(8, builder.encoded_size())).code() ==
        errc::invalid_argument);
}

TEST_CASE("dict: a decoder rejects every truncation of a valid region") {
  sample s;
  auto buf = encode(s.builder());
  for (std::size_t n = 0; n < buf.size(); ++n) {
    exact_region copy{whole(buf), n};
    auto r = sluice::dict_view::parse(copy.span());
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::protocol);
  }
}

TEST_CASE("dict: a decoder rejects adversarial regions with protocol errors") {
  sample s;
  auto good = encode(s.builder());
  const std::size_t payload = 4, matrix = 5, counts = 6, done = 2;
  auto mutated = [&good](auto mutate) {
    exact_region copy{whole(good), good.size()};
    mutate(copy.span());
    return sluice::dict_view::parse(copy.span()).code();
  };
  auto entry = [](std::size_t index, std::size_t at) { return fd::entry_offset(index) + at; };

  SUBCASE("bad magic, version, reserved bytes") {
    CHECK(mutated([](std::span<std::byte> b) { b[0] = std::byte{'X'}; }) == errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) { b[fd::header_at::version] = std::byte{2}; }) ==
          errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) {
            b[fd::header_at::reserved_tail + 3] = std::byte{1};
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            b[entry(0, fd::entry_at::reserved8)] = std::byte{1};
          }) == errc::protocol);
  }
  SUBCASE("huge or inconsistent counts and sizes") {
    CHECK(mutated([](std::span<std::byte> b) {
            put_u64(b, fd::header_at::field_count, 0xFFFFFFFFu);
          }) == errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) {
            put_u64(b, fd::header_at::field_count, sluice::dict_fields_max + 1);
          }) == errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) {
            put_u64(b, fd::header_at::total_bytes, ~std::uint64_t{0});
          }) == errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) {
            put_u64(b, fd::header_at::data_offset, ~std::uint64_t{0} - 63);
          }) == errc::protocol);
    CHECK(mutated([](std::span<std::byte> b) { put_u64(b, fd::header_at::names_offset, 0); }) ==
          errc::protocol);
  }
  SUBCASE("offsets past the end, including ones that wrap around") {
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(payload, fd::entry_at::data_offset), b.size() + 64 - b.size() % 64);
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(payload, fd::entry_at::data_length), ~std::uint64_t{0});
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(payload, fd::entry_at::data_offset), ~std::uint64_t{0} - 63);
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(0, fd::entry_at::name_offset), ~std::uint64_t{0});
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(matrix, fd::entry_at::meta_offset), ~std::uint64_t{0} - 7);
          }) == errc::protocol);
  }
  SUBCASE("overlapping ranges") {
    // counts' data moved onto matrix's data.
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(counts, fd::entry_at::data_offset),
                    get_u64(b, entry(matrix, fd::entry_at::data_offset)));
          }) == errc::protocol);
    // Two names sharing bytes.
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(1, fd::entry_at::name_offset),
                    get_u64(b, entry(0, fd::entry_at::name_offset)));
          }) == errc::protocol);
    // Two tensors sharing one metadata block.
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(counts, fd::entry_at::meta_offset),
                    get_u64(b, entry(matrix, fd::entry_at::meta_offset)));
          }) == errc::protocol);
  }
  SUBCASE("misaligned data and metadata") {
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(payload, fd::entry_at::data_offset),
                    get_u64(b, entry(payload, fd::entry_at::data_offset)) + 8);
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(matrix, fd::entry_at::meta_offset),
                    get_u64(b, entry(matrix, fd::entry_at::meta_offset)) + 4);
          }) == errc::protocol);
  }
  SUBCASE("field contents that no encoder writes") {
    CHECK(mutated([&](std::span<std::byte> b) {
            b[entry(0, fd::entry_at::kind)] = std::byte{0};
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            b[entry(0, fd::entry_at::kind)] = std::byte{7};
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(done, fd::entry_at::scalar), 2);
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, entry(0, fd::entry_at::data_length), 1);
          }) == errc::protocol);
    CHECK(mutated([&](std::span<std::byte> b) {
            b[entry(0, fd::entry_at::name_length)] = std::byte{0};
          }) == errc::protocol);
  }
  SUBCASE("tensor metadata that lies") {
    auto meta = [&](std::size_t index) {
      return get_u64(whole(good), entry(index, fd::entry_at::meta_offset));
    };
    CHECK(mutated([&](std::span<std::byte> b) { b[meta(matrix)] = std::byte{5}; }) ==
          errc::protocol);  // dtype code
    CHECK(mutated([&](std::span<std::byte> b) { b[meta(matrix) + 4] = std::byte{200}; }) ==
          errc::protocol);  // ndim
    CHECK(mutated([&](std::span<std::byte> b) { put_u64(b, meta(matrix) + 8, 3); }) ==
          errc::protocol);  // shape vs bytes
    CHECK(mutated([&](std::span<std::byte> b) {
            put_u64(b, meta(matrix) + 8, ~std::uint64_t{0});
          }) == errc::protocol);  // negative extent
    CHECK(mutated([&](std::span<std::byte> b) { put_u64(b, meta(matrix) + 8 + 2 * 8, 1); }) ==
          errc::protocol);  // strides
  }
  SUBCASE("two fields with one name") {
    sluice::dict_builder b;
    REQUIRE(b.add_int64("ab", 1).ok());
    REQUIRE(b.add_int64("aa", 2).ok());
    auto buf = encode(b);
    const auto second_name = get_u64(whole(buf), entry(1, fd::entry_at::name_offset));
    buf.data()[second_name + 1] = std::byte{'b'};  // "aa" becomes "ab"
    auto r = sluice::dict_view::parse(whole(buf));
    CHECK(r.code() == errc::protocol);
    CHECK(r.error().message().find("two fields are named 'ab'") != std::string::npos);
  }
  CHECK(sluice::dict_view::parse(whole(good)).ok());
}

TEST_CASE("dict: a decoder survives thousands of seeded random corruptions") {
  constexpr std::uint64_t seed = 20240601;
  constexpr int iterations = 5000;
  INFO("seed " << seed);
  sample s;
  auto good = encode(s.builder());
  const std::uint64_t structure_bytes = get_u64(whole(good), fd::header_at::data_offset);
  const std::uint64_t nasty[] = {0,
                                 1,
                                 7,
                                 8,
                                 63,
                                 64,
                                 good.size() - 1,
                                 good.size(),
                                 good.size() + 1,
                                 std::uint64_t{1} << 63,
                                 ~std::uint64_t{0},
                                 ~std::uint64_t{0} - 63};
  sluice::rng rng{seed};
  int accepted = 0;
  std::uint64_t checksum = 0;  // printed below, so every read must happen
  for (int i = 0; i < iterations; ++i) {
    exact_region copy{whole(good), good.size()};
    auto buf = copy.span();
    if (rng.chance(1, 4)) {
      // Plant a boundary value in an 8-byte slot of the header or table.
      const std::uint64_t slot = rng.uniform(structure_bytes / 8) * 8;
      put_u64(buf, slot, nasty[rng.uniform(std::size(nasty))]);
    } else {
      // Flip 1..8 bits, mostly in the structure where they matter.
      const std::uint64_t span = rng.chance(3, 4) ? structure_bytes : buf.size();
      for (std::uint64_t f = 1 + rng.uniform(8); f-- > 0;) {
        buf[rng.uniform(span)] ^= static_cast<std::byte>(1u << rng.uniform(8));
      }
    }
    auto view = sluice::dict_view::parse(buf);
    if (view.ok()) {
      ++accepted;
      checksum += touch_everything(*view);
    } else {
      CHECK((view.code() == errc::protocol || view.code() == errc::invalid_argument));
    }
  }
  MESSAGE("seed " << seed << ": " << accepted << " of " << iterations
                   << " corrupted regions still parsed (checksum " << checksum << ")");
  CHECK(accepted < iterations);
}

// ---- DLPack ----------------------------------------------------------------

TEST_CASE("dict: a tensor view exports as a DLTensor pointing into the region") {
  sample s;
  auto buf = encode(s.builder());
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto t = *view->find("matrix")->as_tensor();
  DLTensor dl = sluice::as_dltensor(t);
  CHECK(dl.data == t.data.data());
  CHECK(aligned(dl.data, 64));
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.device.device_id == 0);
  CHECK(dl.ndim == 2);
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  CHECK(dl.dtype.lanes == 1);
  CHECK(dl.shape[0] == 2);
  CHECK(dl.shape[1] == 3);
  REQUIRE(dl.strides != nullptr);
  CHECK(dl.strides[0] == 3);
  CHECK(dl.strides[1] == 1);
  CHECK(dl.byte_offset == 0);
  CHECK(sluice::to_dlpack(sluice::dtype_bool).code == sluice::dlpack_bool_code);
}

TEST_CASE("dict: to_dlpack keeps the region alive until the consumer deletes it") {
  sample s;
  auto frozen = encode(s.builder()).freeze();
  auto view = sluice::dict_view::parse(frozen.span());
  REQUIRE(view.ok());
  sluice::dlpack_ptr managed =
      sluice::to_dlpack(*view->find("counts")->as_tensor(), frozen.owner());
  CHECK(frozen.owner().use_count() == 2);
  CHECK(managed->dl_tensor.data == view->find("counts")->as_tensor()->data.data());
  CHECK(managed->dl_tensor.shape[0] == 3);
  CHECK(managed->dl_tensor.dtype.code == kDLInt);
  DLManagedTensor* handed_over = managed.release();
  handed_over->deleter(handed_over);  // what a consuming framework does
  CHECK(frozen.owner().use_count() == 1);
}

TEST_CASE("dict: a DLTensor with no strides is imported as compact") {
  std::vector<std::uint8_t> pixels(2 * 3 * 4);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i);
  std::int64_t shape[] = {2, 3, 4};
  DLTensor dl{};
  dl.data = pixels.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 3;
  dl.dtype = {kDLUInt, 8, 1};
  dl.shape = shape;
  dl.strides = nullptr;
  sluice::dict_builder b;
  REQUIRE(sluice::add_dltensor(b, "image", dl).ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto t = *view->find("image")->as_tensor();
  CHECK(t.dtype == sluice::dtype_uint8);
  CHECK(t.info().shape == std::vector<std::int64_t>{2, 3, 4});
  CHECK(t.info().strides == std::vector<std::int64_t>{12, 4, 1});
  CHECK(std::memcmp(t.data.data(), pixels.data(), pixels.size()) == 0);
}

TEST_CASE("dict: a DLTensor with explicit C-contiguous strides and a byte offset is imported") {
  std::vector<double> values{0, 1, 2, 3, 4, 5, 6};
  std::int64_t shape[] = {3, 2};
  std::int64_t strides[] = {2, 1};
  DLTensor dl{};
  dl.data = values.data();
  dl.byte_offset = sizeof(double);  // skip the first element
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 64, 1};
  dl.shape = shape;
  dl.strides = strides;
  sluice::dict_builder b;
  REQUIRE(sluice::add_dltensor(b, "x", dl).ok());
  auto buf = encode(b);
  auto view = sluice::dict_view::parse(whole(buf));
  REQUIRE(view.ok());
  auto t = *view->find("x")->as_tensor();
  CHECK(std::memcmp(t.data.data(), values.data() + 1, 6 * sizeof(double)) == 0);
  auto info = sluice::tensor_info_from_dlpack("x", dl);
  REQUIRE(info.ok());
  CHECK(info->dtype == sluice::dtype_float64);
  CHECK(info->strides == std::vector<std::int64_t>{2, 1});
}

TEST_CASE("dict: a Fortran-order, non-CPU or unknown-dtype DLTensor is rejected") {
  std::vector<float> values(6);
  std::int64_t shape[] = {2, 3};
  std::int64_t fortran[] = {1, 2};
  DLTensor dl{};
  dl.data = values.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape;
  sluice::dict_builder b;

  dl.strides = fortran;
  auto r = sluice::add_dltensor(b, "f", dl);
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.error().message().find("not C-contiguous") != std::string::npos);
  dl.strides = nullptr;

  dl.device = {kDLCUDA, 0};
  CHECK(sluice::add_dltensor(b, "gpu", dl).code() == errc::invalid_argument);
  dl.device = {kDLCPU, 0};

  dl.dtype = {kDLComplex, 32, 1};
  CHECK(sluice::add_dltensor(b, "complex32", dl).code() == errc::invalid_argument);
  dl.dtype = {kDLFloat, 32, 4};
  CHECK(sluice::add_dltensor(b, "vector", dl).code() == errc::invalid_argument);
  dl.dtype = {kDLFloat, 32, 1};

  dl.ndim = -1;
  CHECK(sluice::add_dltensor(b, "negative_ndim", dl).code() == errc::invalid_argument);
  dl.ndim = 2;
  dl.data = nullptr;
  CHECK(sluice::add_dltensor(b, "no_data", dl).code() == errc::invalid_argument);
  CHECK(b.empty());
}
