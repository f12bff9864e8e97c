// Tile handles: the values a kernel body manipulates while it is traced into tile IR.
//
// A Tile is a handle to an IR value of shape [d0, d1, ...] (every dim a power of two; rank 0 = scalar) and
// one element type (a DType, or a pointer to global memory holding that DType). It can also hold a pending
// C++ literal (a *weak* scalar, like a Python scalar in Triton): `t * 0.5f` keeps t's dtype when t is a
// float tile; an int literal takes a tile's dtype; a float literal with an int tile gives f32.
//
// Handles are tracked by the trace so that values reassigned inside for_range/if_ bodies become loop-carried
// values / branch results automatically (see ops.h). Handles only make sense while a kernel is being traced
// (inside the lambda given to Kernel); operations on them outside a trace throw TraceError.
#pragma once
#include <cstdint>
#include <source_location>
#include <type_traits>
#include <vector>

#include "tilejit/types.h"

namespace tilejit {

namespace ir { struct Value; }
namespace dsl { struct TileAccess; }

/// Arithmetic C++ types accepted as weak scalar literals (int, int64_t, float, double, bool, ...).
template <class T>
concept ScalarLiteral = std::is_arithmetic_v<T>;

/// A compile-time kernel parameter (int, int64_t, float, double or bool). Its value is part of the
/// specialization key; it converts to T, and arithmetic with a Tile treats it as a weak literal.
template <class T>
struct Constexpr {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, int64_t> || std::is_same_v<T, float> ||
                    std::is_same_v<T, double> || std::is_same_v<T, bool>,
                "Constexpr<T>: T must be int, int64_t, float, double or bool");
  T value{};
  constexpr operator T() const { return value; }
};

/// Index markers for Tile::operator(): `None` inserts an axis of size 1, `_` keeps an axis.
/// `x(_, None)` is Triton's x[:, None] (expand_dims(x, 1)); `x(None, _)` is x[None, :].
struct NoneIndex {};
struct KeepIndex {};
inline constexpr NoneIndex None{};
inline constexpr KeepIndex _{};
struct Index {
  bool new_axis;
  constexpr Index(NoneIndex) : new_axis(true) {}
  constexpr Index(KeepIndex) : new_axis(false) {}
};

struct TileOperand;

class Tile {
 public:
  /// An empty handle (no value): used for absent optional arguments (mask, other, acc).
  Tile();
  /// A weak scalar literal.
  template <ScalarLiteral T>
  Tile(T v) : Tile() {
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      ival_ = v ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      ival_ = int64_t(v);
    } else {
      kind_ = Kind::Float;
      fval_ = double(v);
    }
  }
  template <class T>
  Tile(const Constexpr<T> &c) : Tile(c.value) {}
  Tile(const Tile &o);
  Tile(Tile &&o) noexcept;
  Tile &operator=(const Tile &o);
  Tile &operator=(Tile &&o) noexcept;
  ~Tile();

  /// False for an empty handle.
  bool valid() const { return kind_ != Kind::Empty; }
  /// True while the handle holds a weak C++ literal rather than an IR value.
  bool is_literal() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  /// Shape ({} for scalars and literals).
  std::vector<int64_t> shape() const;
  int rank() const { return int(shape().size()); }
  /// Element dtype (the pointee dtype for pointer tiles). Literals report i32 / f32 / i1.
  DType dtype() const;
  bool is_ptr() const;
  /// Cast to another dtype (same as cast(*this, t)).
  Tile to(DType t, std::source_location loc = std::source_location::current()) const;

  /// Triton-style indexing with None (new axis) and _ (keep axis); there must be one `_` per dim.
  Tile operator()(Index a, std::source_location loc = std::source_location::current()) const;
  Tile operator()(Index a, Index b, std::source_location loc = std::source_location::current()) const;
  Tile operator()(Index a, Index b, Index c,
                  std::source_location loc = std::source_location::current()) const;
  Tile operator()(Index a, Index b, Index c, Index d,
                  std::source_location loc = std::source_location::current()) const;

  /// Compound assignment rebinds this handle to the result (so it is carried by loops).
  Tile &operator+=(const TileOperand &b);
  Tile &operator-=(const TileOperand &b);
  Tile &operator*=(const TileOperand &b);
  Tile &operator/=(const TileOperand &b);

 private:
  friend struct dsl::TileAccess;
  enum class Kind : uint8_t { Empty, Value, Int, Float, Bool };
  void copy_from(const Tile &o) {
    kind_ = o.kind_;
    value_ = o.value_;
    value_gen_ = o.value_gen_;
    ival_ = o.ival_;
    fval_ = o.fval_;
  }
  Kind kind_ = Kind::Empty;
  ir::Value *value_ = nullptr;
  int64_t ival_ = 0;
  double fval_ = 0;
  uint64_t handle_id_ = 0;   // registration in the active trace (0: not registered)
  uint32_t trace_gen_ = 0;   // which trace registered it
  uint32_t value_gen_ = 0;   // which trace value_ belongs to (a Tile kept past its trace is stale)
};

/// An operator's operand: a Tile or a literal, plus the user's source line (captured where the implicit
/// conversion happens, i.e. at the operator expression) so operator errors can name it.
struct TileOperand {
  Tile tile;
  std::source_location loc;
  TileOperand(const Tile &t, std::source_location l = std::source_location::current()) : tile(t), loc(l) {}
  template <ScalarLiteral T>
  TileOperand(T v, std::source_location l = std::source_location::current()) : tile(v), loc(l) {}
  template <class T>
  TileOperand(const Constexpr<T> &c, std::source_location l = std::source_location::current())
      : tile(c.value), loc(l) {}
};

// ---- kernel parameter handle types ----
/// Pointer to T in global memory (T: one of the tag types i1..f64 of types.h). `p + offsets` → pointer tile.
template <class T>
struct Ptr : Tile {
  using element = T;
  Ptr() = default;
  Ptr(const Tile &t) : Tile(t) {}
};
/// Runtime scalar parameters (and the for_range induction variable, I32).
struct I32 : Tile {
  I32() = default;
  I32(const Tile &t) : Tile(t) {}
};
struct I64 : Tile {
  I64() = default;
  I64(const Tile &t) : Tile(t) {}
};
struct F32 : Tile {
  F32() = default;
  F32(const Tile &t) : Tile(t) {}
};

// ---- operators (numpy broadcasting and Triton type promotion; see ops.h) ----
// Arithmetic: floats and ints (int / and % truncate as in C). Float a / b is IEEE division, except for f32
// where b is broadcast from fewer elements (a scalar, or one value per row or column): then a·(1/b), the
// reciprocal once per element of b, within 2^-23 + 2^-48 relative where 1/b is a normal f32
// (ir/passes/reciprocal_division.cpp); div_rn (ops.h) keeps the division. ptr + int and ptr - int offset
// pointers by elements. Comparisons give i1. & | ^ << >> need ints or i1; && || need i1 (both sides are evaluated).
Tile operator+(const TileOperand &a, const TileOperand &b);
Tile operator-(const TileOperand &a, const TileOperand &b);
Tile operator*(const TileOperand &a, const TileOperand &b);
Tile operator/(const TileOperand &a, const TileOperand &b);
Tile operator%(const TileOperand &a, const TileOperand &b);
Tile operator<(const TileOperand &a, const TileOperand &b);
Tile operator<=(const TileOperand &a, const TileOperand &b);
Tile operator>(const TileOperand &a, const TileOperand &b);
Tile operator>=(const TileOperand &a, const TileOperand &b);
Tile operator==(const TileOperand &a, const TileOperand &b);
Tile operator!=(const TileOperand &a, const TileOperand &b);
Tile operator&(const TileOperand &a, const TileOperand &b);
Tile operator|(const TileOperand &a, const TileOperand &b);
Tile operator^(const TileOperand &a, const TileOperand &b);
Tile operator&&(const TileOperand &a, const TileOperand &b);
Tile operator||(const TileOperand &a, const TileOperand &b);
Tile operator<<(const TileOperand &a, const TileOperand &b);
Tile operator>>(const TileOperand &a, const TileOperand &b);
Tile operator-(const TileOperand &a);
Tile operator~(const TileOperand &a);
Tile operator!(const TileOperand &a);

}  // namespace tilejit
