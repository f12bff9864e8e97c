// Element types of tiles and kernel parameters.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tilejit {

/// Scalar element type of a tile. i1 is the type of masks and comparisons.
enum class DType : uint8_t { i1, i8, i16, i32, i64, f16, bf16, f32, f64 };

/// Size of one element in bytes (i1 is stored as one byte in memory).
int dtype_bytes(DType t);
/// Bit width of the value (i1 → 1).
int dtype_bits(DType t);
bool is_float(DType t);
bool is_int(DType t);  // includes i1
/// "f32", "bf16", ...; the spelling used by the IR printer and the CLI.
std::string_view dtype_name(DType t);
/// Parses a name produced by dtype_name; throws tilejit::Error on an unknown name.
DType parse_dtype(std::string_view name);

/// Element type of an IR value: a scalar dtype, or a pointer to global memory holding that dtype.
struct ElemType {
  DType dtype = DType::f32;
  bool is_ptr = false;
  friend bool operator==(const ElemType &, const ElemType &) = default;
};
std::string elem_type_name(ElemType t);  // "f32" or "ptr<f32>"

// Tag types used in kernel signatures: Ptr<f32>, Ptr<bf16>, ...
struct i1 { static constexpr DType dtype = DType::i1; };
struct i8 { static constexpr DType dtype = DType::i8; };
struct i16 { static constexpr DType dtype = DType::i16; };
struct i32 { static constexpr DType dtype = DType::i32; };
struct i64 { static constexpr DType dtype = DType::i64; };
struct f16 { static constexpr DType dtype = DType::f16; };
struct bf16 { static constexpr DType dtype = DType::bf16; };
struct f32 { static constexpr DType dtype = DType::f32; };
struct f64 { static constexpr DType dtype = DType::f64; };

}  // namespace tilejit
