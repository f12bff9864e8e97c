// The tile IR: SSA values of tile type (shape + element type), ops with regions for loops and branches.
//
// Ownership: a Function owns its body Block; a Block owns its argument Values and its Ops; an Op owns its
// result Values and its regions (one Block each). Values are referenced by raw pointer, and stay valid as
// long as their owner lives. Shapes are static; every dimension is > 0 (a rank-0 shape is a scalar).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tilejit/types.h"

namespace tilejit::ir {

/// Where the user wrote the op (std::source_location captured by the DSL).
struct SourceLoc {
  const char *file = "";
  uint32_t line = 0;
  uint32_t column = 0;
  std::string str() const;  // "file:line" or "<unknown>"
};

/// Tiles the DSL makes, which the verifier requires: every dimension a power of two, at most 2^20 elements (each
/// tile lives in one program's registers; Triton caps tiles at the same size).
constexpr int64_t kMaxTileElements = int64_t(1) << 20;
constexpr bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The type of a value: a tile of `shape` (empty = scalar) with element type `elem`.
struct Type {
  std::vector<int64_t> shape;
  ElemType elem;
  int rank() const { return int(shape.size()); }
  int64_t numel() const;
  bool is_scalar() const { return shape.empty(); }
  DType dtype() const { return elem.dtype; }
  bool is_ptr() const { return elem.is_ptr; }
  std::string str() const;  // "tensor<64x128xbf16>", "i32", "ptr<f32>", "tensor<128xptr<f32>>"
  friend bool operator==(const Type &, const Type &) = default;
};
/// "64x128" for {64,128}, "scalar" for {}.
std::string shape_str(const std::vector<int64_t> &shape);

enum class OpKind : uint16_t {
#define OP(Name, text, lo, hi, regions, props) Name,
#include "ir/ops.def"
#undef OP
};
const char *op_name(OpKind k);
int op_min_operands(OpKind k);
int op_max_operands(OpKind k);  // -1: variadic
int op_num_regions(OpKind k);
/// The spelling of the one boolean attribute (Attrs::flag) an op reads, as the printer writes it ("rn" for
/// mul/div, "index" for cast, ...), or null for an op without one (ops.def says what each means).
const char *op_flag_name(OpKind k);
/// The valued attributes an op must have, as the printer names them ("value", "axis", "start" and "end",
/// "perm", "pred", "kind"); empty for an op without any.
std::vector<const char *> op_attribute_names(OpKind k);

/// The properties of each op, stated in ir/ops.def (its header says what each means).
namespace op_props {
enum : uint8_t { Pure = 1, Elementwise = 2 | Pure, Reads = 4, Writes = 8, Control = 16 };
}
/// Reads and writes no memory and has no regions: CSE may merge it, DCE may erase it when unused.
bool is_pure(OpKind k);
/// Pure, computed element by element from same-shaped operands (the lowering's elementwise family).
bool is_elementwise(OpKind k);
/// Reads memory (load, atomic_add).
bool reads_memory(OpKind k);
/// Writes memory (store, atomic_add): never erased, and a loop holding one is not hoisted from.
bool writes_memory(OpKind k);

enum class CmpPred : uint8_t { eq, ne, lt, le, gt, ge };
enum class ReduceKind : uint8_t { sum, max, min };
const char *cmp_pred_name(CmpPred p);
const char *reduce_kind_name(ReduceKind r);

struct Op;
struct Block;

struct Value {
  Type type;
  Op *def = nullptr;         // defining op, or null for a block argument
  Block *block = nullptr;    // for block arguments: the owning block
  int index = 0;             // result index in def, or argument index in block
  std::string name;          // optional hint for the printer (kernel parameter names)
};

/// Attributes; which fields an op reads is documented in ops.def.
struct Attrs {
  int64_t axis = 0;
  int64_t ivalue = 0;        // Constant of int/i1 dtype
  double fvalue = 0.0;       // Constant of float dtype
  std::vector<int64_t> ints; // Arange {start,end}; Trans permutation
  CmpPred pred = CmpPred::eq;
  ReduceKind reduce = ReduceKind::sum;
  bool flag = false;         // Dot: allow_tf32
};

struct Block {
  std::vector<std::unique_ptr<Value>> args;
  std::vector<std::unique_ptr<Op>> ops;
  Op *parent = nullptr;  // enclosing op, or null for a function body
  Value *arg(int i) const { return args[i].get(); }
  Value *add_arg(Type t);
};

struct Op {
  OpKind kind;
  std::vector<Value *> operands;
  std::vector<std::unique_ptr<Value>> results;
  std::vector<std::unique_ptr<Block>> regions;
  Attrs attrs;
  SourceLoc loc;
  Block *parent = nullptr;  // block containing this op

  Value *result(int i = 0) const { return results[i].get(); }
  Value *operand(int i) const { return operands[i]; }
  int num_operands() const { return int(operands.size()); }
  int num_results() const { return int(results.size()); }
  Block *region(int i) const { return regions[i].get(); }
  Value *add_result(Type t);
};

/// How a kernel parameter was specialized (part of the compile key, as in Triton).
struct ParamInfo {
  std::string name;
  Type type;                // scalar: ptr<dtype>, i32, i64, f32
  bool align16 = false;     // pointer: address % 16 == 0
  bool div16 = false;       // integer: value % 16 == 0
};

struct Function {
  std::string name;
  std::vector<ParamInfo> params;   // one body argument per param, same order
  std::unique_ptr<Block> body;     // args = params; no terminator
  Function();
  Value *param(int i) const { return body->arg(i); }
};

// ---- utilities over the IR (ir/ir.cpp) ----
/// Calls f(op) for every op in the block, recursing into regions, in program order (pre-order).
template <class F> void walk(Block &b, F &&f);
/// Replaces every use of `from` by `to` among the ops in `b` (recursively).
void replace_all_uses(Block &b, Value *from, Value *to);
/// Number of uses of each value used inside b (recursively); values not used are absent.
std::unordered_map<const Value *, int> use_counts(Block &b);

template <class F> void walk(Block &b, F &&f) {
  for (auto &op : b.ops) {
    f(*op);
    for (auto &r : op->regions) walk(*r, f);
  }
}

}  // namespace tilejit::ir
