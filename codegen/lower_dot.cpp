// Dot: acc[M,N] += a[M,K] · b[K,N]. f16/bf16 dots of MMA-compatible shapes go to lower_dot_mma.cpp (tensor
// cores); the rest (f32, tf32, small shapes) takes this correct-but-slow path: a and b are staged
// row-major in shared memory in their own dtype (f32 operands rounded to tf32 first when allow_tf32), then
// every thread runs an LLVM loop over K updating its accumulator registers with f32 fma. The result keeps
// the accumulator's layout.
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <map>

#include "codegen/lowering.h"
#include "codegen/mma.h"

namespace tilejit::codegen {
namespace {

/// Writes tile t (rank 2, row-major with `row_stride`) at `base` (a shared-memory pointer).
void stage(Lowering &L, const Tile &t, ElemType et, int64_t row_stride, llvm::Value *base, bool tf32) {
  auto &b = L.b;
  const Layout &l = *t.layout;
  llvm::Type *mt = L.mem_type(et);
  llvm::Align align(uint64_t(dtype_bytes(et.dtype)));
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    if (l.reg_is_duplicate(r)) continue;
    llvm::Value *v = t.regs[size_t(r)];
    if (tf32) v = b.CreateBitCast(b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_f2tf32_rna), {v}), b.getFloatTy());
    llvm::Value *idx = L.linear_index(l, r, {row_stride, 1});
    b.CreateAlignedStore(L.to_mem(v, et), b.CreateInBoundsGEP(mt, base, idx), align);
  }
}

llvm::Value *to_f32(Lowering &L, llvm::Value *v, DType t) {
  if (t == DType::f32) return v;
  if (is_float(t)) return t == DType::f64 ? L.b.CreateFPTrunc(v, L.b.getFloatTy()) : L.b.CreateFPExt(v, L.b.getFloatTy());
  return L.b.CreateSIToFP(v, L.b.getFloatTy());
}

}  // namespace

void stage_invariant_dot_operands(Lowering &L, const ir::Op &for_op) {
  auto it = L.plan.staging.find(&for_op);
  if (it == L.plan.staging.end()) return;
  const LoopStaging &staging = it->second;
  for (const StagedOperand &s : staging.operands) {
    llvm::Value *at =
        s.dynamic ? L.place_dynamic_staging(s.offset, s.bytes, s.align) : L.new_static_smem(s.bytes, s.align);
    if (!at) L.fail("internal: the plan stages more loop-invariant operands than static shared memory holds");
    const bool row_major = s.form == StagedOperand::Form::RowMajor;
    if (row_major) stage(L, L.get(s.source), s.source->type.elem, s.source->type.shape[1], at, false);
    else stage_mma_operand(L, s, at);
    L.persistent_operands[s.operand] = {at, s.form};
    if (!L.notes) continue;
    const std::string where = s.dynamic ? fmt::format("{} bytes of the dynamic buffer from byte {}", s.bytes, s.offset)
                                        : fmt::format("a static array of {} bytes", s.bytes);
    L.note_on(L.cur_op,
              fmt::format("stages a loop-invariant {} operand in shared memory once, before the loop{}: {}",
                          row_major ? "dot" : s.index == 0 ? "tensor-core A" : "tensor-core B",
                          s.wgmma_rows ? " (in wgmma's row order)" : "", where),
              /*merge=*/false);  // one note per operand, even where two read alike
  }
  if (!staging.operands.empty()) L.barrier();
  for (const ir::Op *dot : staging.preload) preload_mma_fragments(L, *dot);
}

Tile lower_dot(Lowering &L, const ir::Op &op) {
  if (dot_uses_mma(op, L.opts.num_warps)) return lower_dot_mma(L, op);
  auto &b = L.b;
  const ir::Value *av = op.operand(0), *bv = op.operand(1), *cv = op.operand(2), *res = op.result();
  if (av->type.rank() != 2 || bv->type.rank() != 2 || cv->type.rank() != 2)
    L.fail(fmt::format("dot needs rank-2 operands, got {}, {} and {}", av->type.str(), bv->type.str(), cv->type.str()));
  int64_t M = av->type.shape[0], K = av->type.shape[1], N = bv->type.shape[1];
  if (bv->type.shape[0] != K || cv->type.shape[0] != M || cv->type.shape[1] != N)
    L.fail(fmt::format("dot shapes do not match: a {}, b {}, acc {}", av->type.str(), bv->type.str(), cv->type.str()));
  if (res->type.dtype() != DType::f32 || cv->type.dtype() != DType::f32)
    L.fail(fmt::format("dot accumulates in f32; got an accumulator of {}", cv->type.str()));
  ElemType aet = av->type.elem, bet = bv->type.elem;
  const Layout &l = L.layout_of(res);
  Tile acc = L.get_in(cv, l);
  const Tile &ta = L.get(av);
  const Tile &tb = L.get(bv);
  if (ta.is_scalar() || tb.is_scalar()) L.fail("dot operands must be tiles");
  bool tf32 = op.attrs.flag;
  bool a_tf32 = tf32 && aet.dtype == DType::f32, b_tf32 = tf32 && bet.dtype == DType::f32;

  // Operands staged before an enclosing loop are read from their own arrays; the others go through the
  // shared scratch buffer (a first, then b).
  llvm::Value *a_base = a_tf32 ? nullptr : L.staged_for(av, false), *b_base = b_tf32 ? nullptr : L.staged_for(bv, false);
  bool stage_a = !a_base, stage_b = !b_base;
  if (stage_a || stage_b) {
    int64_t a_bytes = stage_a ? M * K * dtype_bytes(aet.dtype) : 0;
    int64_t b_off = (a_bytes + 15) / 16 * 16;
    L.reserve_smem(b_off + (stage_b ? K * N * dtype_bytes(bet.dtype) : 0));
    if (stage_a) a_base = L.smem_addr(L.i32(0), b.getInt8Ty(), 0);
    if (stage_b) b_base = L.smem_addr(L.i32(0), b.getInt8Ty(), b_off);
    L.barrier();
    if (stage_a) stage(L, ta, aet, K, a_base, a_tf32);
    if (stage_b) stage(L, tb, bet, N, b_base, b_tf32);
    L.barrier();
  }

  // Per-thread row offsets (m·K) and columns (n), one per distinct register index along each dim.
  std::map<int64_t, llvm::Value *> rows, cols;
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    auto idx = l.reg_index(r);
    if (!rows.count(idx[0])) rows[idx[0]] = b.CreateMul(L.coord(l, 0, r), L.i32(K));
    if (!cols.count(idx[1])) cols[idx[1]] = L.coord(l, 1, r);
  }
  llvm::Type *amt = L.mem_type(aet), *bmt = L.mem_type(bet);
  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *loop = L.new_block("dot.k"), *done = L.new_block("dot.end");
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *k = b.CreatePHI(b.getInt32Ty(), 2, "k");
  k->addIncoming(L.i32(0), pre);
  std::vector<llvm::PHINode *> phis;
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    phis.push_back(b.CreatePHI(b.getFloatTy(), 2));
    phis.back()->addIncoming(acc.regs[size_t(r)], pre);
  }
  std::map<int64_t, llvm::Value *> a_vals, b_vals;
  llvm::Align aal(uint64_t(dtype_bytes(aet.dtype))), bal(uint64_t(dtype_bytes(bet.dtype)));
  for (auto &[i, row] : rows)
    a_vals[i] = to_f32(L, L.from_mem(b.CreateAlignedLoad(amt, b.CreateInBoundsGEP(amt, a_base, b.CreateAdd(row, k)), aal), aet), aet.dtype);
  llvm::Value *krow = b.CreateMul(k, L.i32(N));
  for (auto &[i, col] : cols)
    b_vals[i] = to_f32(L, L.from_mem(b.CreateAlignedLoad(bmt, b.CreateInBoundsGEP(bmt, b_base, b.CreateAdd(krow, col)), bal), bet), bet.dtype);
  std::vector<llvm::Value *> next;
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    auto idx = l.reg_index(r);
    next.push_back(b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {a_vals[idx[0]], b_vals[idx[1]], phis[size_t(r)]}));
  }
  llvm::Value *k_next = b.CreateAdd(k, L.i32(1));
  llvm::BasicBlock *latch = b.GetInsertBlock();
  k->addIncoming(k_next, latch);
  for (size_t r = 0; r < phis.size(); ++r) phis[r]->addIncoming(next[r], latch);
  b.CreateCondBr(b.CreateICmpSLT(k_next, L.i32(K)), loop, done);
  b.SetInsertPoint(done);
  return Tile{l, next};
}

}  // namespace tilejit::codegen
