// Shared checking and IR-building helpers of the DSL ops: error messages, dtype promotion, numpy
// broadcasting, literal materialization. Every helper takes the op's name and the user's source location
// so that its TraceError names both.
#pragma once
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "tilejit/tile.h"

namespace tilejit::dsl {

using SrcLoc = std::source_location;
using Shape = std::vector<int64_t>;

/// Throws TraceError("<msg> at file:line").
[[noreturn]] void fail(const SrcLoc &loc, std::string_view msg);
ir::SourceLoc ir_loc(const SrcLoc &loc);

/// "64x32 (bf16)", "scalar (i32)", "128 (ptr<f32>)".
std::string describe(const ir::Type &t);
/// As above for values; "literal 0.5" / "literal 3" / "literal true" for weak literals; "empty" otherwise.
std::string describe(const Tile &t);

using ir::is_pow2;  // ir/ir.h
/// Fails unless every dim is a power of two (what: "result shape", ...).
void check_pow2_shape(const Shape &shape, const char *op, const char *what, const SrcLoc &loc);
/// Normalizes a possibly negative axis into [0, rank); fails naming the op otherwise.
int normalize_axis(int axis, int rank, const char *op, const ir::Type &t, const SrcLoc &loc);

/// Appends an op with one result at the builder's insertion point.
ir::Value *emit(TraceContext &ctx, ir::OpKind kind, std::vector<ir::Value *> operands, ir::Type type,
                const SrcLoc &loc, ir::Attrs attrs = {});
/// A constant of `type` (splat): int dtypes take `i`, float dtypes take `f`.
ir::Value *make_constant(TraceContext &ctx, const ir::Type &type, double f, int64_t i, const SrcLoc &loc);
ir::Value *cast_value(TraceContext &ctx, ir::Value *v, DType to, const SrcLoc &loc);
/// Broadcasts v (numpy rules) to `shape` with Splat / ExpandDims / Broadcast; fails if incompatible.
ir::Value *broadcast_value(TraceContext &ctx, ir::Value *v, const Shape &shape, const char *op,
                           const SrcLoc &loc);
/// Numpy broadcast of two shapes; false if incompatible.
bool broadcast_shapes(const Shape &a, const Shape &b, Shape &out);

/// Triton's promotion of two (strong) dtypes.
DType promote(DType a, DType b);
/// The dtype a literal gets on its own: i32 (i64 if it does not fit), f32, i1.
DType literal_dtype(const Tile &t);

/// Fails if t is an empty handle ("<op>: <what> is an empty Tile").
void require_valid(const Tile &t, const char *op, const char *what, const SrcLoc &loc);
/// A value stored or loaded through a pointer must have the pointee dtype (literals adapt); fails naming the op,
/// `what` (e.g. "the value"), both types and the cast to write.
void check_value_dtype(const Tile &value, DType pointee, const ir::Type &ptr_type, const char *op, const char *what,
                       const SrcLoc &loc);
/// The IR value of t; a literal becomes a scalar constant of literal_dtype().
ir::Value *to_value(TraceContext &ctx, const Tile &t, const char *op, const char *what, const SrcLoc &loc);
/// t as dtype `dt` and shape `shape`: literals become constants; values are cast and broadcast.
ir::Value *materialize(TraceContext &ctx, const Tile &t, DType dt, const Shape &shape, const char *op,
                       const SrcLoc &loc);

/// Elementwise operands after promotion and broadcasting: all values have `type`.
struct Unified {
  std::vector<ir::Value *> values;
  ir::Type type;
};
/// Promotes (weak literals adapt to the strong operands) and broadcasts; pointer operands are an error.
Unified unify(TraceContext &ctx, const std::vector<const Tile *> &operands, const char *op, const SrcLoc &loc);

}  // namespace tilejit::dsl
