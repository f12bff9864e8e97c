// index_to_f32 (a Cast with the index flag, include/tilejit/ops.h): an i32 tile of positions converted to
// f32 as f32(V_r + B) + C_r, where B is one value per thread, C_r a compile-time constant per register, and
// V_r the plain value of whatever part is not an arange, scalar or constant (one value per row for a
// row-broadcast q_idx; absent for a pure sum of aranges).
//
// Why: position arithmetic inside a loop, such as ALiBi's distance q_idx − kv_idx, is plainly an integer add
// and an I2FP per element every iteration, or (when part of it is loop-invariant) one f32 per register kept
// live across the loop, which spills at the 128-register cap. An arange's element in register r is
// thread_base + off_r (disjoint bits), so a sum of aranges along different dims and runtime scalars is
// B + C_r; one conversion per distinct V_r + B (LLVM merges equal ones: two per thread for a row-broadcast
// V), then one FADD of an immediate per element, and nothing per column kept live.
//
// Exactness: f32(V_r + B) + C_r rounds once when |V_r + B| < 2^24 and the result is below 2^24 in magnitude
// (both integers are then exact in f32), so it equals the plain conversion bit for bit; beyond, it may
// differ by up to two ulps (ops.h says so). Constant parts of 2^24 or more take the plain conversion; where
// the runtime parts' i32 sum wraps, the plain form converts the wrapped value and this one may not.
//
// fma_index(index, a, c) (an Fma with the split flag) goes one step further: a·index + c is kept as two parts,
// y = fma(a, C_r, c) (one fma with an immediate per register) and t = a·f32(V_r + B) (one value per thread and
// row), recorded as Tile::lazy_y / lazy_t. Their consumers fold t instead of adding it per element: a row
// max takes max(y) + t (lower_reduce.cpp), a softmax fma (y + t)·m + z becomes y·m + (t·m + z), and
// where(cond, y + t, −inf) stays split (lower_split_consumer). ALiBi's score − a·|q_idx − kv_idx| on a key
// block wholly on one side of the diagonal (where it is score ∓ a·(q_idx − kv_idx)) thus costs one fma per
// score (kernels/flex/flex_kernel.cpp).
#include <llvm/IR/Constants.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "codegen/lowering.h"

namespace tilejit::codegen {
namespace {

using K = ir::OpKind;

// V_r + B + C_r over the registers of layout `l` (the cast's layout).
struct Affine {
  llvm::Value *base = nullptr;     // B: i32, one per thread; null means 0
  std::vector<int64_t> c;          // C_r
  std::vector<llvm::Value *> var;  // V_r: i32 per register, or empty (0)
};

class Decompose {
 public:
  Decompose(Lowering &L, const Layout &l) : L_(L), l_(l) {}

  // `dims[k]`: the dim of l that v's dim k runs along, or -1 where v has size 1 there (broadcast).
  // Falls back to v's plain registers where v is not of the form, when v has the cast's rank and its
  // registers are at hand; nothing otherwise (the caller one level up then takes its own plain
  // registers). Memoized: an operand DAG that reuses a subexpression is visited once per (value, dims),
  // never once per path.
  std::optional<Affine> of(const ir::Value *v, const std::vector<int> &dims) {
    auto key = std::make_pair(v, dims);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::optional<Affine> a = ++visited_ > kMaxVisits ? std::nullopt : split(v, dims);
    if (!a) a = plain(v);
    memo_.emplace(std::move(key), a);
    return a;
  }
  /// False when the operand had more distinct parts than kMaxVisits: the caller then converts plainly.
  bool within_budget() const { return visited_ <= kMaxVisits; }

 private:
  static constexpr int kMaxVisits = 256;

  std::optional<Affine> split(const ir::Value *v, const std::vector<int> &dims) {
    if (v->type.dtype() != DType::i32 || v->type.is_ptr()) return std::nullopt;
    if (v->def && v->def->kind == K::Constant) return constant(v->def->attrs.ivalue);  // scalar or tile
    if (v->type.is_scalar() || !v->def) return uniform(v);
    const ir::Op &op = *v->def;
    switch (op.kind) {
      case K::Splat: return of(op.operand(0), {});
      case K::Broadcast: {
        std::vector<int> d = dims;
        const auto &src = op.operand(0)->type.shape;
        for (size_t k = 0; k < d.size() && k < src.size(); ++k)
          if (src[k] == 1) d[k] = -1;
        return of(op.operand(0), d);
      }
      case K::ExpandDims: {
        std::vector<int> d = dims;
        if (op.attrs.axis < 0 || size_t(op.attrs.axis) >= d.size()) return std::nullopt;
        d.erase(d.begin() + op.attrs.axis);
        return of(op.operand(0), d);
      }
      case K::Arange: {
        if (dims.size() != 1) return std::nullopt;
        int64_t start = op.attrs.ints.at(0);
        if (dims[0] < 0) return constant(start);  // a length-1 arange stretched: its one value
        int d = dims[0];
        Affine a{L_.thread_base(l_, d), {}, {}};
        for (int64_t r = 0; r < l_.num_regs(); ++r)
          a.c.push_back(start + (l_.reg_offset(d, l_.reg_index(r)[size_t(d)]) & (l_.shape[d] - 1)));
        return a;
      }
      case K::Add:
      case K::Sub: {
        auto x = of(op.operand(0), dims), y = of(op.operand(1), dims);
        if (!x || !y) return std::nullopt;
        bool add = op.kind == K::Add;
        Affine a;
        if (!y->base) a.base = x->base;
        else if (!x->base) a.base = add ? y->base : L_.b.CreateNeg(y->base);
        else a.base = add ? L_.b.CreateAdd(x->base, y->base) : L_.b.CreateSub(x->base, y->base);
        for (int64_t r = 0; r < l_.num_regs(); ++r)
          a.c.push_back(add ? x->c[size_t(r)] + y->c[size_t(r)] : x->c[size_t(r)] - y->c[size_t(r)]);
        if (y->var.empty()) {
          a.var = x->var;
        } else {
          for (int64_t r = 0; r < l_.num_regs(); ++r) {
            llvm::Value *yv = y->var[size_t(r)], *xv = x->var.empty() ? nullptr : x->var[size_t(r)];
            a.var.push_back(!xv ? (add ? yv : L_.b.CreateNeg(yv))
                                : add ? L_.b.CreateAdd(xv, yv) : L_.b.CreateSub(xv, yv));
          }
        }
        return a;
      }
      default: return std::nullopt;  // anything else: of() takes its plain registers
    }
  }

  Affine constant(int64_t c) { return Affine{nullptr, std::vector<int64_t>(size_t(l_.num_regs()), c), {}}; }
  std::optional<Affine> uniform(const ir::Value *v) {
    const Tile &t = L_.get(v);
    if (!t.is_scalar()) return std::nullopt;
    return Affine{t.regs[0], std::vector<int64_t>(size_t(l_.num_regs()), 0), {}};
  }
  // v (the cast's rank, its size-1 dims broadcast) in the cast's layout, register by register.
  std::optional<Affine> plain(const ir::Value *v) {
    if (v->type.is_scalar() || v->type.shape.size() != size_t(l_.rank())) return std::nullopt;
    for (int i = 0; i < l_.rank(); ++i)
      if (v->type.shape[size_t(i)] != l_.shape[i] && v->type.shape[size_t(i)] != 1) return std::nullopt;
    Layout want = v->type.shape == l_.shape ? l_ : reshape_same_params(l_, v->type.shape);
    // Only where v's registers are already there or recomputed: never a trip through shared memory that the
    // plain cast would not make (nothing emitted here may have side effects: the result may go unused).
    const Tile &cur = L_.get(v);
    if (!cur.is_scalar() && !same_distribution(*cur.layout, want) && !L_.is_remat(v))
      return std::nullopt;
    Tile t = L_.get_in(v, want);
    Affine a{nullptr, std::vector<int64_t>(size_t(l_.num_regs()), 0), {}};
    for (int64_t r = 0; r < l_.num_regs(); ++r) {  // broadcast dims: the register of index 0 along them
      auto idx = l_.reg_index(r);
      for (int i = 0; i < l_.rank(); ++i) idx[size_t(i)] %= want.regs_along(i);
      a.var.push_back(t.regs[size_t(want.reg_from_index(idx))]);
    }
    return a;
  }

  Lowering &L_;
  const Layout &l_;
  std::map<std::pair<const ir::Value *, std::vector<int>>, std::optional<Affine>> memo_;
  int visited_ = 0;
};

// The parts of index_to_f32 of the cast `cast` in layout l: per register f32(V_r + B) (null where V_r + B is
// 0; one LLVM value per distinct (V_r, B), so equal parts are the same pointer) and the constant C_r.
struct IndexParts {
  std::vector<llvm::Value *> f;
  std::vector<int64_t> c;
};

std::optional<IndexParts> index_parts(Lowering &L, const ir::Op &cast, const Layout &l) {
  if (cast.kind != K::Cast || !cast.attrs.flag || cast.result()->type.is_scalar()) return std::nullopt;
  std::vector<int> dims(size_t(l.rank()));
  for (int i = 0; i < l.rank(); ++i) dims[size_t(i)] = l.shape[i] == 1 ? -1 : i;
  Decompose dec(L, l);
  auto a = dec.of(cast.operand(0), dims);
  if (!dec.within_budget()) return std::nullopt;
  // Constants past 2^24 (summed in 64 bits here, wrapping in i32 in the plain form) are not positions.
  if (!a || std::any_of(a->c.begin(), a->c.end(), [](int64_t c) { return c <= -(1 << 24) || c >= (1 << 24); }))
    return std::nullopt;
  auto &b = L.b;
  IndexParts out{{}, a->c};
  std::map<llvm::Value *, llvm::Value *> converted;  // V_r (or null) → f32(V_r + B)
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    llvm::Value *v = a->var.empty() ? nullptr : a->var[size_t(r)];
    auto [it, fresh] = converted.emplace(v, nullptr);
    if (fresh) {
      llvm::Value *i = !v ? a->base : !a->base ? v : b.CreateAdd(v, a->base);
      it->second = i ? b.CreateSIToFP(i, b.getFloatTy()) : nullptr;
    }
    out.f.push_back(it->second);
  }
  return out;
}

// v is −inf in every element: a float Constant, possibly splatted or broadcast (a where's masked side).
bool is_neg_inf_constant(const ir::Value *v) {
  const ir::Op *c = splatted_constant(v, false);
  return c && is_float(c->result()->type.dtype()) && std::isinf(c->attrs.fvalue) && c->attrs.fvalue < 0;
}

// v's lowering when it is split and already in layout l; null otherwise. Looks only: converting here would
// emit a conversion the generic path then emits again.
const Tile *split_operand(Lowering &L, const ir::Value *v, const Layout &l) {
  const Tile &t = L.get(v);
  return !t.lazy_y.empty() && !t.is_scalar() && *t.layout == l ? &t : nullptr;
}

}  // namespace

std::optional<Tile> lower_index_to_f32(Lowering &L, const ir::Op &op, const Layout &l) {
  auto p = index_parts(L, op, l);
  if (!p) return std::nullopt;
  Tile out{l, {}};
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    llvm::Value *f = p->f[size_t(r)];
    int64_t c = p->c[size_t(r)];
    llvm::Value *k = llvm::ConstantFP::get(L.b.getFloatTy(), double(c));
    out.regs.push_back(!f ? k : c == 0 ? f : L.b.CreateFAdd(f, k));
  }
  return out;
}

std::optional<Tile> lower_fma_index(Lowering &L, const ir::Op &op, const Layout &l) {
  if (op.kind != K::Fma || !op.attrs.flag) return std::nullopt;
  auto p = index_parts(L, *op.operand(0)->def, l);
  if (!p) return std::nullopt;
  auto &b = L.b;
  Tile a = L.get_in(op.operand(1), l), c = L.get_in(op.operand(2), l);
  llvm::Type *f32 = b.getFloatTy();
  Tile out{l, {}};
  std::map<std::pair<llvm::Value *, llvm::Value *>, llvm::Value *> products;  // (a_r, f_r) → a_r·f_r
  bool split = false;
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    llvm::Value *ar = a.regs[size_t(r)], *cr = c.regs[size_t(r)], *f = p->f[size_t(r)];
    int64_t k = p->c[size_t(r)];
    // k = 0: y = c, a·f carrying a NaN or infinite a into the sum; where f is absent too (the index is the
    // constant 0) y is the fma itself, so that a NaN or infinite a still gives what fma(0, a, c) gives.
    llvm::Value *y = k == 0 && f ? cr
                                 : b.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {ar, llvm::ConstantFP::get(f32, double(k)), cr});
    llvm::Value *t = llvm::ConstantFP::get(f32, 0.0);
    if (f) {
      auto [it, fresh] = products.emplace(std::make_pair(ar, f), nullptr);
      if (fresh) it->second = b.CreateFMul(ar, f);
      t = it->second;
      split = true;
    }
    out.lazy_y.push_back(y);
    out.lazy_t.push_back(t);
    out.regs.push_back(f ? b.CreateFAdd(y, t) : y);
  }
  if (!split) out.lazy_y.clear(), out.lazy_t.clear();
  return out;
}


std::optional<Tile> lower_split_consumer(Lowering &L, const ir::Op &op, const Layout &l) {
  if (op.result()->type.dtype() != DType::f32) return std::nullopt;
  if (op.kind == K::Fma && !op.attrs.flag) {
    // (y + t)·m + z as y·m + (t·m + z): t is shared by a row's registers, and so (for a row-broadcast z) is
    // t·m + z, one fma per distinct pair instead of an add per element.
    int xi = 0;
    const Tile *xp = split_operand(L, op.operand(0), l);
    if (!xp) xp = split_operand(L, op.operand(1), l), xi = 1;
    if (!xp) return std::nullopt;
    const Tile x = *xp;  // a copy: get_in below may add entries to the lowering's table
    Tile m = L.get_in(op.operand(1 - xi), l), z = L.get_in(op.operand(2), l);
    auto &b = L.b;
    llvm::Type *f32 = b.getFloatTy();
    std::map<std::tuple<llvm::Value *, llvm::Value *, llvm::Value *>, llvm::Value *> offsets;
    Tile out{l, {}};
    for (int64_t r = 0; r < l.num_regs(); ++r) {
      llvm::Value *mr = m.regs[size_t(r)], *zr = z.regs[size_t(r)], *t = x.lazy_t[size_t(r)];
      auto [it, fresh] = offsets.emplace(std::make_tuple(t, mr, zr), nullptr);
      if (fresh) it->second = b.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {t, mr, zr});
      out.regs.push_back(b.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {x.lazy_y[size_t(r)], mr, it->second}));
    }
    return out;
  }
  if (op.kind == K::Select) {
    // where(cond, y + t, −inf) = where(cond, y, −inf) + t: the split passes through.
    const Tile *xp = split_operand(L, op.operand(1), l);
    if (!xp || !is_neg_inf_constant(op.operand(2))) return std::nullopt;
    const Tile x = *xp;
    Tile cond = L.get_in(op.operand(0), l);
    Tile out{l, {}};
    for (int64_t r = 0; r < l.num_regs(); ++r) {
      llvm::Value *ninf = llvm::ConstantFP::getInfinity(L.b.getFloatTy(), true);
      out.regs.push_back(L.b.CreateSelect(cond.regs[size_t(r)], x.regs[size_t(r)], ninf));
      out.lazy_y.push_back(L.b.CreateSelect(cond.regs[size_t(r)], x.lazy_y[size_t(r)], ninf));
      out.lazy_t.push_back(x.lazy_t[size_t(r)]);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace tilejit::codegen
