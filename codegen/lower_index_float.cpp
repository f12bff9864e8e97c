// x ± f32(arange) where x is an integer-valued f32 (a cast from an integer): positions turned into floats,
// as in a distance |q_idx − kv_idx| formed in f32.
//
// Why: the arange's element in register r is thread_base + off_r (disjoint bits, off_r a compile-time
// constant), so its f32 value is f32(start + thread_base) + off_r. Lowered plainly, each register's
// sitofp is loop-invariant and LLVM keeps one f32 per register live across the loop (16 registers for a
// 128x64 accumulator tile at 8 warps, which spill at the 128-register cap); otherwise the conversion is
// an IADD and an I2FP per register each iteration. Written as (x ± f32(start + thread_base)) ± off_r, the
// first term is one value per x register (per row of a row-broadcast x) and off_r an immediate: one FADD per
// element and nothing loop-invariant per column. LLVM never reassociates f32 this way on its own.
//
// Exactness: both forms compute x ± (b + off_r) with integers b, off_r < 2^24. When x is an integer with
// |x|, |x ± b| and the result below 2^24 every step is exact, so the result equals the interpreter's
// single rounding bit for bit; positions past 2^24 (already rounded as f32) may differ by one ulp.
#include <llvm/IR/Constants.h>

#include "codegen/lowering.h"

namespace tilejit::codegen {
namespace {

using K = ir::OpKind;

// The arange under a chain of Broadcast/ExpandDims and one int→f32 Cast: its start and the tile dim of
// `v` it runs along, or nothing.
struct FloatArange {
  int64_t start = 0;
  int dim = 0;
};

std::optional<FloatArange> float_arange(const ir::Value *v) {
  std::vector<int> inserted;  // ExpandDims axes from the outside in
  bool cast = false;
  for (const ir::Value *cur = v; cur && cur->def;) {
    const ir::Op &op = *cur->def;
    if (op.kind == K::Broadcast) {
      cur = op.operand(0);
    } else if (op.kind == K::ExpandDims) {
      inserted.push_back(int(op.attrs.axis));
      cur = op.operand(0);
    } else if (op.kind == K::Cast && !cast && op.result()->type.dtype() == DType::f32 &&
               is_int(op.operand(0)->type.dtype()) && op.operand(0)->type.dtype() != DType::i1) {
      cast = true;
      cur = op.operand(0);
    } else if (op.kind == K::Arange && cast && op.result()->type.dtype() == DType::i32 &&
               op.result()->type.shape.size() == 1) {
      // Map dim 0 of the arange out through the inserted axes (innermost first).
      int dim = 0;
      for (auto it = inserted.rbegin(); it != inserted.rend(); ++it)
        if (*it <= dim) ++dim;
      // A length-1 arange broadcast along its dim repeats one value: not a coordinate there.
      if (dim >= int(v->type.shape.size()) || v->type.shape[size_t(dim)] != op.result()->type.shape[0])
        return std::nullopt;
      return FloatArange{op.attrs.ints.at(0), dim};
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// True when v is an f32 cast from an integer, under Broadcast/ExpandDims: its values are integers.
bool integer_valued_f32(const ir::Value *v) {
  for (const ir::Value *cur = v; cur && cur->def;) {
    const ir::Op &op = *cur->def;
    if (op.kind == K::Broadcast || op.kind == K::ExpandDims) {
      cur = op.operand(0);
      continue;
    }
    return op.kind == K::Cast && op.result()->type.dtype() == DType::f32 && is_int(op.operand(0)->type.dtype());
  }
  return false;
}

}  // namespace

std::optional<Tile> lower_index_float(Lowering &L, const ir::Op &op, const Layout &l) {
  if ((op.kind != K::Add && op.kind != K::Sub) || op.result()->type.dtype() != DType::f32 ||
      op.result()->type.is_scalar())
    return std::nullopt;
  int ai = -1;  // which operand is the f32 arange
  std::optional<FloatArange> ar;
  for (int i = 0; i < 2 && !ar; ++i)
    if (integer_valued_f32(op.operand(1 - i)) && (ar = float_arange(op.operand(i)))) ai = i;
  if (!ar || op.operand(ai)->type.shape != op.result()->type.shape) return std::nullopt;

  auto &b = L.b;
  Tile x = L.get_in(op.operand(1 - ai), l);
  llvm::Value *base = b.CreateSIToFP(b.CreateAdd(L.thread_base(l, ar->dim), L.i32(ar->start)), b.getFloatTy());
  Tile out{l, {}};
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    double off = double(l.reg_offset(ar->dim, l.reg_index(r)[size_t(ar->dim)]) & (l.shape[ar->dim] - 1));
    llvm::Value *xr = x.regs[size_t(r)], *v;
    if (op.kind == K::Add) v = b.CreateFAdd(b.CreateFAdd(xr, base), llvm::ConstantFP::get(b.getFloatTy(), off));
    else if (ai == 1) v = b.CreateFSub(b.CreateFSub(xr, base), llvm::ConstantFP::get(b.getFloatTy(), off));
    else v = b.CreateFAdd(b.CreateFSub(base, xr), llvm::ConstantFP::get(b.getFloatTy(), off));
    out.regs.push_back(v);
  }
  return out;
}

}  // namespace tilejit::codegen
