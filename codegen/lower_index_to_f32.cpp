// index_to_f32 (a Cast with the index flag, include/tilejit/ops.h): an i32 tile of positions converted to
// f32 as f32(B) + C_r, where B is one value per thread and C_r a compile-time constant per register.
//
// Why: position arithmetic inside a loop, such as ALiBi's distance q_idx − kv_idx, is plainly an integer add
// and an I2FP per element every iteration, or (when part of it is loop-invariant) one f32 per register kept
// live across the loop, which spills at the 128-register cap. An arange's element in register r is
// thread_base + off_r (disjoint bits), so a sum of aranges along different dims and runtime scalars is
// B + C_r; one conversion of B per thread, then one FADD per distinct C_r (LLVM merges equal ones: a thread's
// 2 rows x 16 columns of a 128x64 accumulator tile hold 18 distinct row − column offsets, not 32).
//
// Exactness: f32(B) + C_r rounds once when |B| < 2^24 and |B + C_r| < 2^24 (both integers are then exact in
// f32), so it equals the plain conversion bit for bit; beyond, it may differ by one ulp (ops.h says so).
// i32 wrap-around is not modelled: positions do not wrap.
#include <llvm/IR/Constants.h>

#include "codegen/lowering.h"

namespace tilejit::codegen {
namespace {

using K = ir::OpKind;

// B + C_r over the registers of layout `l` (the cast's layout).
struct Affine {
  llvm::Value *base = nullptr;  // i32; null means 0
  std::vector<int64_t> c;       // per register
};

class Decompose {
 public:
  Decompose(Lowering &L, const Layout &l) : L_(L), l_(l) {}

  // `dims[k]`: the dim of l that v's dim k runs along, or -1 where v has size 1 there (broadcast).
  std::optional<Affine> of(const ir::Value *v, const std::vector<int> &dims, int depth = 0) {
    if (depth > 32 || v->type.dtype() != DType::i32 || v->type.is_ptr()) return std::nullopt;
    if (v->type.is_scalar() || !v->def) return uniform(v);
    const ir::Op &op = *v->def;
    switch (op.kind) {
      case K::Constant: return constant(op.attrs.ivalue);
      case K::Splat: return of(op.operand(0), {}, depth + 1);
      case K::Broadcast: {
        std::vector<int> d = dims;
        const auto &src = op.operand(0)->type.shape;
        for (size_t k = 0; k < d.size() && k < src.size(); ++k)
          if (src[k] == 1) d[k] = -1;
        return of(op.operand(0), d, depth + 1);
      }
      case K::ExpandDims: {
        std::vector<int> d = dims;
        if (op.attrs.axis < 0 || size_t(op.attrs.axis) >= d.size()) return std::nullopt;
        d.erase(d.begin() + op.attrs.axis);
        return of(op.operand(0), d, depth + 1);
      }
      case K::Arange: {
        if (dims.size() != 1) return std::nullopt;
        int64_t start = op.attrs.ints.at(0);
        if (dims[0] < 0) return constant(start);  // a length-1 arange stretched: its one value
        int d = dims[0];
        Affine a{L_.thread_base(l_, d), {}};
        for (int64_t r = 0; r < l_.num_regs(); ++r)
          a.c.push_back(start + (l_.reg_offset(d, l_.reg_index(r)[size_t(d)]) & (l_.shape[d] - 1)));
        return a;
      }
      case K::Add:
      case K::Sub: {
        auto x = of(op.operand(0), dims, depth + 1), y = of(op.operand(1), dims, depth + 1);
        if (!x || !y) return std::nullopt;
        bool add = op.kind == K::Add;
        Affine a;
        if (!y->base) a.base = x->base;
        else if (!x->base) a.base = add ? y->base : L_.b.CreateNeg(y->base);
        else a.base = add ? L_.b.CreateAdd(x->base, y->base) : L_.b.CreateSub(x->base, y->base);
        for (int64_t r = 0; r < l_.num_regs(); ++r)
          a.c.push_back(add ? x->c[size_t(r)] + y->c[size_t(r)] : x->c[size_t(r)] - y->c[size_t(r)]);
        return a;
      }
      default: return std::nullopt;  // anything else: not of this form
    }
  }

 private:
  Affine constant(int64_t c) { return Affine{nullptr, std::vector<int64_t>(size_t(l_.num_regs()), c)}; }
  std::optional<Affine> uniform(const ir::Value *v) {
    const Tile &t = L_.get(v);
    if (!t.is_scalar()) return std::nullopt;
    return Affine{t.regs[0], std::vector<int64_t>(size_t(l_.num_regs()), 0)};
  }

  Lowering &L_;
  const Layout &l_;
};

}  // namespace

std::optional<Tile> lower_index_to_f32(Lowering &L, const ir::Op &op, const Layout &l) {
  if (op.kind != K::Cast || !op.attrs.flag || op.result()->type.is_scalar()) return std::nullopt;
  std::vector<int> dims(size_t(l.rank()));
  for (int i = 0; i < l.rank(); ++i) dims[size_t(i)] = l.shape[i] == 1 ? -1 : i;
  auto a = Decompose(L, l).of(op.operand(0), dims);
  if (!a) return std::nullopt;
  auto &b = L.b;
  llvm::Value *fb = a->base ? b.CreateSIToFP(a->base, b.getFloatTy()) : nullptr;
  Tile out{l, {}};
  for (int64_t c : a->c) {
    llvm::Value *k = llvm::ConstantFP::get(b.getFloatTy(), double(c));
    out.regs.push_back(!fb ? k : c == 0 ? fb : b.CreateFAdd(fb, k));
  }
  return out;
}

}  // namespace tilejit::codegen
