// Reduce (sum/max/min) and ArgReduce (max/min → i32 index of the first extreme) along one axis.
// Three stages, each skipping what the layout makes unnecessary (decided at compile time):
//   1. within the thread: combine the registers along the axis (duplicate registers skipped);
//   2. within the warp: butterfly shuffles over the lane bits of the axis that are not replication bits;
//   3. across warps (only if a warp bit of the axis is distinct): every thread writes its partials to shared
//      memory, then combines the partials of all warps along the axis in a fixed order, so every copy of a
//      result is bitwise identical.
// The result is in the slice layout of the operand (rank 0: a scalar every thread holds). f16/bf16 are
// combined in f32 and rounded once at the end.
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/lowering.h"

namespace tilejit::codegen {
namespace {

struct Partial {
  llvm::Value *val = nullptr;
  llvm::Value *idx = nullptr;  // ArgReduce only (i32)
};

class Reducer {
 public:
  Reducer(Lowering &L, const ir::Op &op) : L(L), b(L.b), op(op) {
    dt = op.operand(0)->type.dtype();
    fl = is_float(dt);
    arg = op.kind == ir::OpKind::ArgReduce;
    kind = op.attrs.reduce;
    if (arg && kind == ir::ReduceKind::sum) L.fail("arg_reduce needs max or min, not sum");
    if (op.operand(0)->type.is_ptr()) L.fail("cannot reduce a tile of pointers");
  }

  Tile run() {
    const Tile &in = L.get(op.operand(0));
    if (in.is_scalar()) L.fail("cannot reduce a scalar");
    const Layout &l = *in.layout;
    int axis = int(op.attrs.axis);
    if (axis < 0 || axis >= l.rank()) L.fail(fmt::format("axis {} is out of range for a rank-{} tile", axis, l.rank()));
    int k = l.dims[size_t(axis)];
    const auto &par = l.parent;
    int64_t shape_a = l.shape[size_t(axis)];
    int log_s = log2_exact(par.size_per_thread[size_t(k)]), log_t = log2_exact(par.threads_per_warp[size_t(k)]);
    int log_w = log2_exact(par.warps_per_cta[size_t(k)]);
    Layout rl = slice_layout(l, axis);
    int64_t nres = rl.rank() ? rl.num_regs() : 1;

    // 1. within the thread
    std::vector<Partial> acc(static_cast<size_t>(nres));
    for (int64_t q = 0; q < nres; ++q) {
      std::vector<int64_t> rest = rl.rank() ? rl.reg_index(q) : std::vector<int64_t>{};
      std::vector<int64_t> regs;
      for (int64_t ia = 0; ia < l.regs_along(axis); ++ia) {
        if (ia % par.size_per_thread[size_t(k)] >= shape_a) continue;  // duplicate register
        auto idx = rest;
        idx.insert(idx.begin() + axis, ia);
        regs.push_back(l.reg_from_index(idx));
      }
      if (llvm::Value *t = shared_split(in, regs)) {
        // max/min of y_r + t over registers sharing t: of y_r, then + t once (rounding is monotone, so
        // this is exactly the max/min of the sums).
        for (int64_t r : regs) {
          Partial p{in.lazy_y[size_t(r)]};
          acc[size_t(q)] = acc[size_t(q)].val ? combine(acc[size_t(q)], p) : p;
        }
        acc[size_t(q)].val = b.CreateFAdd(acc[size_t(q)].val, t);
        continue;
      }
      for (int64_t r : regs) {
        Partial p{widen(in.regs[size_t(r)]), arg ? L.coord(l, axis, r) : nullptr};
        acc[size_t(q)] = acc[size_t(q)].val ? combine(acc[size_t(q)], p) : p;
      }
    }
    // 2. within the warp
    for (int bit = 0; bit < log_t; ++bit) {
      if ((int64_t(1) << (log_s + bit)) >= shape_a) continue;  // replication bit: lanes hold the same elements
      unsigned lane_mask = 1u << (l.lane_shift(k) + bit);
      for (auto &p : acc) {
        Partial other{shuffle(p.val, lane_mask), arg ? shuffle(p.idx, lane_mask) : nullptr};
        p = combine(p, other);
      }
    }
    // 3. across warps
    std::vector<int> warp_bits;
    for (int bit = 0; bit < log_w; ++bit)
      if ((int64_t(1) << (log_s + log_t + bit)) < shape_a) warp_bits.push_back(5 + l.warp_shift(k) + bit);
    if (!warp_bits.empty()) across_warps(acc, warp_bits, l.num_threads());

    Tile out;
    if (rl.rank()) out.layout = rl;
    for (auto &p : acc) out.regs.push_back(arg ? finish_index(p.idx) : narrow(p.val));
    return out;
  }

 private:
  Lowering &L;
  llvm::IRBuilder<> &b;
  const ir::Op &op;
  DType dt;
  bool fl = false, arg = false;
  ir::ReduceKind kind;

  // The part t every register of `regs` shares when `in` is split (Tile::lazy_t) and this is an f32 max or
  // min; null otherwise.
  llvm::Value *shared_split(const Tile &in, const std::vector<int64_t> &regs) const {
    if (in.lazy_t.empty() || arg || kind == ir::ReduceKind::sum || dt != DType::f32 || regs.empty()) return nullptr;
    llvm::Value *t = in.lazy_t[size_t(regs[0])];
    for (int64_t r : regs)
      if (in.lazy_t[size_t(r)] != t) return nullptr;
    return t;
  }

  llvm::Value *widen(llvm::Value *v) {
    if (dt == DType::f16 || dt == DType::bf16) return b.CreateFPExt(v, b.getFloatTy());
    return v;
  }
  llvm::Value *narrow(llvm::Value *v) {
    if (dt == DType::f16 || dt == DType::bf16) return b.CreateFPTrunc(v, L.reg_type(ElemType{dt, false}));
    return v;
  }
  llvm::Value *finish_index(llvm::Value *i) {
    return b.CreateSExtOrTrunc(i, L.reg_type(op.result()->type.elem));
  }

  // true when y should replace x (y is strictly better, or equal with a smaller index)
  llvm::Value *better(llvm::Value *x, llvm::Value *y) {
    bool max = kind == ir::ReduceKind::max;
    if (fl) return max ? b.CreateFCmpOGT(y, x) : b.CreateFCmpOLT(y, x);
    return max ? b.CreateICmpSGT(y, x) : b.CreateICmpSLT(y, x);
  }

  Partial combine(const Partial &x, const Partial &y) {
    if (arg) {
      llvm::Value *eq = fl ? b.CreateFCmpOEQ(x.val, y.val) : b.CreateICmpEQ(x.val, y.val);
      llvm::Value *take = b.CreateOr(better(x.val, y.val), b.CreateAnd(eq, b.CreateICmpSLT(y.idx, x.idx)));
      return Partial{b.CreateSelect(take, y.val, x.val), b.CreateSelect(take, y.idx, x.idx)};
    }
    switch (kind) {
      case ir::ReduceKind::sum: return Partial{fl ? b.CreateFAdd(x.val, y.val) : b.CreateAdd(x.val, y.val)};
      case ir::ReduceKind::max:
        return Partial{fl ? b.CreateMaxNum(x.val, y.val) : b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x.val, y.val)};
      case ir::ReduceKind::min:
        return Partial{fl ? b.CreateMinNum(x.val, y.val) : b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x.val, y.val)};
    }
    return x;
  }

  llvm::Value *shfl32(llvm::Value *v, unsigned lane_mask, bool is_float) {
    auto id = is_float ? llvm::Intrinsic::nvvm_shfl_sync_bfly_f32 : llvm::Intrinsic::nvvm_shfl_sync_bfly_i32;
    return b.CreateCall(L.intrinsic(id), {b.getInt32(0xffffffffu), v, b.getInt32(lane_mask), b.getInt32(0x1f)});
  }

  llvm::Value *shuffle(llvm::Value *v, unsigned lane_mask) {
    llvm::Type *ty = v->getType();
    if (ty->isFloatTy()) return shfl32(v, lane_mask, true);
    if (ty->isIntegerTy(32)) return shfl32(v, lane_mask, false);
    if (ty->isIntegerTy() && ty->getIntegerBitWidth() < 32)
      return b.CreateTrunc(shfl32(b.CreateZExt(v, b.getInt32Ty()), lane_mask, false), ty);
    // 64-bit: two 32-bit halves
    llvm::Value *bits = ty->isDoubleTy() ? b.CreateBitCast(v, b.getInt64Ty()) : v;
    llvm::Value *lo = shfl32(b.CreateTrunc(bits, b.getInt32Ty()), lane_mask, false);
    llvm::Value *hi = shfl32(b.CreateTrunc(b.CreateLShr(bits, 32), b.getInt32Ty()), lane_mask, false);
    llvm::Value *joined = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
    return ty->isDoubleTy() ? b.CreateBitCast(joined, ty) : joined;
  }

  void across_warps(std::vector<Partial> &acc, const std::vector<int> &tid_bits, int nthreads) {
    llvm::Type *vt = acc[0].val->getType();
    int64_t vbytes = int64_t(L.mod.getDataLayout().getTypeAllocSize(vt));
    int64_t nres = int64_t(acc.size());
    int64_t val_bytes = nres * nthreads * vbytes;
    int64_t idx_base = (val_bytes + 15) / 16 * 16;
    L.reserve_smem(arg ? idx_base + nres * nthreads * 4 : val_bytes);
    llvm::Align va{uint64_t(vbytes)}, ia{4};
    L.barrier();
    for (int64_t q = 0; q < nres; ++q) {
      llvm::Value *slot = b.CreateAdd(L.i32(q * nthreads), L.tid());
      b.CreateAlignedStore(acc[size_t(q)].val, L.smem_addr(slot, vt), va);
      if (arg) b.CreateAlignedStore(acc[size_t(q)].idx, L.smem_addr(slot, b.getInt32Ty(), idx_base), ia);
    }
    L.barrier();
    unsigned clear = 0;
    for (int bit : tid_bits) clear |= 1u << bit;
    llvm::Value *base_tid = b.CreateAnd(L.tid(), L.i32(~clear & 0xffffffffu));
    int64_t combos = int64_t(1) << tid_bits.size();
    for (int64_t q = 0; q < nres; ++q) {
      Partial total;
      for (int64_t w = 0; w < combos; ++w) {
        unsigned deposit = 0;
        for (size_t i = 0; i < tid_bits.size(); ++i)
          if (w >> i & 1) deposit |= 1u << tid_bits[i];
        llvm::Value *slot = b.CreateAdd(L.i32(q * nthreads), b.CreateOr(base_tid, L.i32(deposit)));
        Partial p{b.CreateAlignedLoad(vt, L.smem_addr(slot, vt), va),
                  arg ? b.CreateAlignedLoad(b.getInt32Ty(), L.smem_addr(slot, b.getInt32Ty(), idx_base), ia) : nullptr};
        total = w == 0 ? p : combine(total, p);
      }
      acc[size_t(q)] = total;
    }
  }
};

}  // namespace

Tile lower_reduce(Lowering &L, const ir::Op &op) { return Reducer(L, op).run(); }

}  // namespace tilejit::codegen
