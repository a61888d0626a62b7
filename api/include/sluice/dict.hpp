// sluice::dict: structured values ("FlatDict"). A flat dictionary of named
// fields encoded into ONE contiguous byte region, so a reader gets every
// byte field and every tensor as a view into the region, without a copy,
// and a writer fills the region straight from its own buffers (a small
// header and a big body need not be concatenated first).
//
// The byte layout, its limits and its errors are in docs/values.md.
// Part of the public vocabulary (standard library only; DLPack interop
// lives in runtime/memory/flat_dict.hpp so dlpack.h stays out of here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.hpp"

namespace sluice {

// ---- limits (docs/values.md, "Limits") -------------------------------------

/// Fields in one dict. A dict is one record, not a database; the bound
/// keeps the field table under 48 KiB and parsing cost small and fixed.
inline constexpr std::size_t dict_fields_max = 1024;
/// Bytes in a field name (names are stored with a one-byte-range length).
inline constexpr std::size_t dict_name_bytes_max = 255;
/// Dimensions of a tensor. Frameworks rarely go past 8; 16 leaves room
/// while keeping a metadata block at most 264 bytes.
inline constexpr std::size_t tensor_ndim_max = 16;
/// Buffers one bytes or tensor field may be gathered from (Linux IOV_MAX,
/// so a field can later be sent with one writev).
inline constexpr std::size_t dict_gather_parts_max = 1024;
/// Size of one encoded dict (1 TiB). Far above any segment, and far below
/// 2^64, so no size or offset arithmetic can overflow.
inline constexpr std::uint64_t dict_encoded_bytes_max = std::uint64_t{1} << 40;
/// Alignment of every bytes, string and tensor data area, relative to the
/// region start, which must itself be this aligned (design.md: tensors are
/// consumed in place).
inline constexpr std::size_t dict_data_alignment = 64;
/// Names starting with this prefix are reserved for Sluice.
inline constexpr std::string_view dict_reserved_prefix = "__";

// ---- field kinds and tensor metadata ---------------------------------------

/// What a field holds. Stored in the region: values are pinned, never
/// renumber or reuse one.
enum class field_kind : std::uint8_t {
  int64 = 1,    ///< A signed 64-bit integer, stored inline.
  float64 = 2,  ///< An IEEE-754 double, stored inline.
  boolean = 3,  ///< true or false, stored inline.
  string = 4,   ///< Bytes with a text meaning (UTF-8 is not validated).
  bytes = 5,    ///< Opaque bytes.
  tensor = 6,   ///< A dense, C-contiguous tensor on the CPU.
};

/// "int64", "tensor", ...; "unknown" for a value outside the enum.
std::string_view to_string(field_kind kind) noexcept;

/// A tensor element type code. Numerically DLPack's DLDataTypeCode in the
/// DLPack 1.0 numbering (0.6 is the same for 0..5 and lacks bool = 6).
/// Stored in the region: pinned.
enum class dtype_code : std::uint8_t {
  signed_int = 0,    ///< kDLInt
  unsigned_int = 1,  ///< kDLUInt
  ieee_float = 2,    ///< kDLFloat
  bfloat = 4,        ///< kDLBfloat
  complex = 5,       ///< kDLComplex
  boolean = 6,       ///< kDLBool (DLPack 0.8 and later)
};

/// An element type; mirrors DLDataType field for field. Known types:
/// signed_int/unsigned_int of 8, 16, 32, 64 bits; ieee_float of 16, 32,
/// 64; bfloat of 16; complex of 64 and 128 (two floats of half the bits,
/// real first); boolean of 8; lanes is always 1.
struct dtype {
  dtype_code code = dtype_code::unsigned_int;
  std::uint8_t bits = 8;
  std::uint16_t lanes = 1;

  friend bool operator==(const dtype&, const dtype&) = default;
};

inline constexpr dtype dtype_int8{dtype_code::signed_int, 8, 1};
inline constexpr dtype dtype_int16{dtype_code::signed_int, 16, 1};
inline constexpr dtype dtype_int32{dtype_code::signed_int, 32, 1};
inline constexpr dtype dtype_int64{dtype_code::signed_int, 64, 1};
inline constexpr dtype dtype_uint8{dtype_code::unsigned_int, 8, 1};
inline constexpr dtype dtype_uint16{dtype_code::unsigned_int, 16, 1};
inline constexpr dtype dtype_uint32{dtype_code::unsigned_int, 32, 1};
inline constexpr dtype dtype_uint64{dtype_code::unsigned_int, 64, 1};
inline constexpr dtype dtype_float16{dtype_code::ieee_float, 16, 1};
inline constexpr dtype dtype_float32{dtype_code::ieee_float, 32, 1};
inline constexpr dtype dtype_float64{dtype_code::ieee_float, 64, 1};
inline constexpr dtype dtype_bfloat16{dtype_code::bfloat, 16, 1};
inline constexpr dtype dtype_complex64{dtype_code::complex, 64, 1};
inline constexpr dtype dtype_complex128{dtype_code::complex, 128, 1};
inline constexpr dtype dtype_bool{dtype_code::boolean, 8, 1};

/// True when `type` is one of the known types above.
bool is_known(dtype type) noexcept;
/// Bytes per element. REQUIRES: is_known(type).
std::uint64_t itemsize_bytes(dtype type) noexcept;
/// "float32", "bfloat16", ...; e.g. "dtype(code=5, bits=64, lanes=1)" otherwise.
std::string to_string(dtype type);

/// Where a tensor's memory is; numerically DLPack's DLDeviceType. Only cpu
/// is accepted today: a region is host memory.
enum class device_type : std::int32_t {
  cpu = 1,   ///< kDLCPU
  cuda = 2,  ///< kDLCUDA (named for messages; not accepted yet)
};

/// Mirrors DLDevice: a type and an index (0 for the CPU).
struct device {
  device_type type = device_type::cpu;
  std::int32_t id = 0;

  friend bool operator==(const device&, const device&) = default;
};

/// What a writer says about a tensor it adds.
struct tensor_info {
  sluice::dtype dtype = dtype_float32;
  /// Dimensions, outermost first; each >= 0; at most tensor_ndim_max.
  std::vector<std::int64_t> shape{};
  /// In elements, one per dimension. Absent means compact row-major. When
  /// given it must be C-contiguous: strides[i] == product(shape[i+1..])
  /// for every dimension of extent > 1. As frameworks do, an extent-1
  /// dimension may carry any stride, and so may every dimension of an
  /// empty tensor (one with an extent 0).
  std::optional<std::vector<std::int64_t>> strides{};
  sluice::device device{};
};

/// A tensor read from a region. Borrows: `data` points into the region;
/// `shape` and `strides` point into the dict_view it came from.
struct tensor_view {
  sluice::dtype dtype;
  std::span<const std::int64_t> shape;
  /// Always present and always the compact row-major strides of `shape`.
  std::span<const std::int64_t> strides;
  sluice::device device;
  /// The elements, exactly element_count() * itemsize_bytes(dtype) bytes,
  /// 64-byte aligned.
  std::span<const std::byte> data;

  std::uint64_t element_count() const noexcept;
  /// An owning copy of the metadata (allocates).
  tensor_info info() const;
};

// ---- writing ---------------------------------------------------------------

namespace detail {
/// A field as the builder holds it until encode_into. Internal.
struct pending_field {
  std::string name{};
  field_kind kind = field_kind::int64;
  std::uint64_t scalar_bits = 0;                    // int64, float64, boolean
  std::string text{};                               // string: a copy
  std::vector<std::span<const std::byte>> parts{};  // bytes, tensor: borrowed
  std::uint64_t data_bytes = 0;
  /// A tensor whose elements the caller writes after encoding (no parts).
  bool room_only = false;
  sluice::dtype dtype{};
  std::vector<std::int64_t> shape{};
};
}  // namespace detail

struct dict_reserved;

/// Collects fields and encodes them into one region.
///
/// Every add_* validates its field and returns errc::invalid_argument
/// (with a message naming the field) and adds nothing when it is wrong, so
/// a builder always holds a valid dict. Names: non-empty, at most
/// dict_name_bytes_max bytes, unique, not starting with "__".
///
/// Bytes and tensor fields BORROW caller memory: the spans (not the list
/// of them) must stay valid and unchanged until encode_into returns. A
/// field given as several spans holds their concatenation (gather).
/// Strings and names are copied.
///
/// Thread safety: none; one writer at a time.
class dict_builder {
 public:
  result<void> add_int64(std::string_view name, std::int64_t value);
  result<void> add_float64(std::string_view name, double value);
  result<void> add_bool(std::string_view name, bool value);
  result<void> add_string(std::string_view name, std::string_view text);

  result<void> add_bytes(std::string_view name, std::span<const std::byte> bytes);
  result<void> add_bytes(std::string_view name, std::span<const std::span<const std::byte>> parts);
  result<void> add_bytes(std::string_view name,
                         std::initializer_list<std::span<const std::byte>> parts);

  /// The supplied bytes must be exactly product(shape) * itemsize; the
  /// dtype known; the device {cpu, 0}; strides absent or C-contiguous.
  result<void> add_tensor(std::string_view name, const tensor_info& info,
                          std::span<const std::byte> data);
  result<void> add_tensor(std::string_view name, const tensor_info& info,
                          std::span<const std::span<const std::byte>> parts);
  result<void> add_tensor(std::string_view name, const tensor_info& info,
                          std::initializer_list<std::span<const std::byte>> parts);

  /// Room for a tensor whose elements are written in place, after
  /// encode_into: encode_into lays out its metadata and leaves its data
  /// area unwritten, for the caller to fill through
  /// dict_view::find(name)->as_tensor() on the region (a reservation in
  /// the pool, say, so the elements are never copied). Checked as
  /// add_tensor checks.
  result<void> add_tensor_room(std::string_view name, const tensor_info& info);

  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }

  /// The exact number of bytes encode_into writes; at most
  /// dict_encoded_bytes_max.
  std::uint64_t encoded_size() const;

  /// Writes the dict into `out` (e.g. a freshly allocated shm region),
  /// copying each borrowed buffer once, straight to its place.
  /// REQUIRES (else invalid_argument): out.size() == encoded_size() and
  /// out.data() is dict_data_alignment-aligned.
  result<void> encode_into(std::span<std::byte> out) const;

 private:
  result<void> admit(detail::pending_field field);
  result<void> check_new_name(std::string_view name) const;
  friend struct dict_reserved;

  /// Names starting with dict_reserved_prefix are accepted: a builder of
  /// Sluice's own (dict_reserved::builder).
  bool sluice_names_ = false;

  std::vector<detail::pending_field> fields_;
  std::set<std::string, std::less<>> names_;
  // An upper bound of the encoded size, kept so add_* can refuse a field
  // that would push the dict past dict_encoded_bytes_max.
  std::uint64_t encoded_bytes_bound_ = 0;
};

// ---- reading ---------------------------------------------------------------

namespace detail {
/// A validated field table entry, copied out of the region. Internal.
struct field_record {
  std::string_view name;  // into the region
  field_kind kind = field_kind::int64;
  std::uint64_t scalar_bits = 0;
  std::span<const std::byte> data;  // into the region
  sluice::dtype dtype;
  std::uint32_t ndim = 0;
  std::uint32_t dims_index = 0;        // into the dict_view's dims
  const std::int64_t* dims = nullptr;  // shape[ndim] then strides[ndim]
};
}  // namespace detail

/// One field of a parsed dict. Borrows from its dict_view and the region.
/// The as_* accessors return errc::invalid_argument when the field is of
/// another kind (the message names the field and both kinds).
class field_view {
 public:
  explicit field_view(detail::field_record record) : record_(record) {}

  std::string_view name() const noexcept { return record_.name; }
  field_kind kind() const noexcept { return record_.kind; }

  result<std::int64_t> as_int64() const;
  result<double> as_float64() const;
  result<bool> as_bool() const;
  /// A view into the region (no copy).
  result<std::string_view> as_string() const;
  /// A view into the region (no copy); also accepts a string field.
  result<std::span<const std::byte>> as_bytes() const;
  /// A view into the region (no copy).
  result<tensor_view> as_tensor() const;

 private:
  result<void> expect(field_kind wanted) const;
  detail::field_record record_;
};

/// A parsed, validated dict over a region. Parsing checks every offset,
/// length, count, alignment and overlap once and copies the field table;
/// accessors then never read outside the region, even if its bytes change
/// later (shared memory), though the bytes they return may.
///
/// Borrows the region: it must outlive this view and every view taken
/// from it. Move-only, because field views point into its storage (a move
/// keeps them valid).
class dict_view {
 public:
  /// REQUIRES (else invalid_argument): region.data() is
  /// dict_data_alignment-aligned. A region that is not a well-formed dict
  /// (truncated, corrupted, adversarial) gives errc::protocol.
  static result<dict_view> parse(std::span<const std::byte> region);

  dict_view(dict_view&&) noexcept = default;
  dict_view& operator=(dict_view&&) noexcept = default;
  dict_view(const dict_view&) = delete;
  dict_view& operator=(const dict_view&) = delete;

  /// The field named `name`, or nullptr. O(log n).
  const field_view* find(std::string_view name) const noexcept;

  /// Fields in stored order (the order they were added).
  std::span<const field_view> fields() const noexcept { return fields_; }
  auto begin() const noexcept { return fields_.begin(); }
  auto end() const noexcept { return fields_.end(); }
  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }

  std::span<const std::byte> region() const noexcept { return region_; }

 private:
  dict_view() = default;
  friend struct dict_parser;

  std::span<const std::byte> region_;
  std::vector<field_view> fields_;
  std::vector<std::uint32_t> by_name_;  // indexes into fields_, sorted by name
  std::vector<std::int64_t> dims_;
};

}  // namespace sluice
