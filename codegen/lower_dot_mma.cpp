// Dot on tensor cores: acc[M,N] += a[M,K] · b[K,N] with mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.
//
// The result has the MMA accumulator layout (codegen/mma.h): each warp owns MT m16 tiles × NT n8 tiles and
// each thread 4 f32 per tile. Operand fragments come from
//   - registers, when a is already in the MMA layout of [M,K] with every warp holding whole rows (the C
//     fragments of n8 tiles 2·kt and 2·kt+1 are the A fragment of k16 tile kt: attention's p → dot(p, v));
//   - registers loaded once before the enclosing loop (loop-invariant a, e.g. attention's q);
//   - shared memory otherwise: the operand is stored row-major with 16-byte chunks XOR-swizzled by row
//     (swizzled_offset) and read with ldmatrix.x4 (a; b stored [N,K] when it is a folded Trans) or
//     ldmatrix.x4.trans (b stored [K,N]; a stored [K,M] when it is a folded Trans, the backward's Pᵀ).
//     Loop-invariant operands live in shared memory of their own, staged once before the loop where
//     stage_operands (codegen/stage_operands.h) placed them; the others go through the dynamic scratch buffer.
//
// Hopper (sm_90a): when the warps tile M only (whole warpgroups) and B can be read in 128-byte-swizzled panels
// (wgmma_shape_ok), the same dot is issued as wgmma.mma_async (codegen/wgmma.h). Nothing around the dot
// changes: the swizzled staging above is exactly the layout a wgmma descriptor reads once the buffer is
// 1024-byte aligned (the dynamic buffer is aligned at kernel entry, static operands are declared so), and
// the wgmma accumulator is the MMA layout. A is read from registers (attention's p, or ldmatrix from its
// staging), by the wgmma from a folded Trans's [K,M] staging through an M-major descriptor (transpose-a, the
// columns in wgmma's row order), or by the wgmma itself from shared memory, its rows stored in the order wgmma
// reads them (wgmma_a_row; an A of 16 or 32 columns in 32- or 64-byte swizzled rows): a loop-invariant A such
// as attention's q staged once before the loop, or an A the loop's pipeline copies (matmul's a), copied into
// its stage buffer in that order. For q that is 4-10% faster on the H200 than re-reading it with ldmatrix
// (bench/results/LEARNED.md), and keeping it in registers across iterations is unsafe (see
// preload_mma_fragments). A dot that reads no scratch-staged
// operand commits its group without waiting; the wait moves to the first use of its result, and a dot
// continuing that accumulator chains onto it (Lowering::defer_wgmma, take_pending).
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "codegen/lowering.h"
#include "codegen/mma.h"
#include "codegen/wgmma.h"

namespace tilejit::codegen {

llvm::Value *swizzled_chunk(Lowering &L, llvm::Value *row, llvm::Value *chunk, int64_t cols, int64_t rows) {
  auto &b = L.b;
  int64_t panel_cols = std::min<int64_t>(cols, 64);
  int64_t chunks = panel_cols / 8;
  int64_t rows_per_line = std::max<int64_t>(1, 8 / chunks);
  int64_t mask = std::min<int64_t>(8, chunks) - 1;
  llvm::Value *phase = b.CreateAnd(b.CreateLShr(row, log2_exact(rows_per_line)), L.i32(mask));
  llvm::Value *off = b.CreateAdd(b.CreateMul(row, L.i32(panel_cols)),
                                 b.CreateShl(b.CreateXor(b.CreateAnd(chunk, L.i32(chunks - 1)), phase), 3));
  if (cols == panel_cols) return off;
  llvm::Value *panel = b.CreateLShr(chunk, log2_exact(chunks));
  return b.CreateAdd(off, b.CreateMul(panel, L.i32(rows * panel_cols)));
}

namespace {

using Frag = std::array<llvm::Value *, 4>;

struct Geometry {
  int64_t M = 0, N = 0, K = 0, MT = 0, NT = 0, KT = 0;
  int wm = 1, wn = 1;
  llvm::Value *wm_idx = nullptr, *wn_idx = nullptr;  // this warp's position (i32)
};

Geometry geometry(Lowering &L, const Layout &l, int64_t K) {
  Geometry g;
  g.M = l.shape[0];
  g.N = l.shape[1];
  g.K = K;
  g.wm = l.parent.warps_per_cta[0];
  g.wn = l.parent.warps_per_cta[1];
  g.MT = g.M / (16 * g.wm);
  g.NT = g.N / (8 * g.wn);
  g.KT = K / 16;
  auto &b = L.b;
  g.wm_idx = b.CreateAnd(b.CreateLShr(L.warp(), log2_exact(g.wn)), L.i32(g.wm - 1));
  g.wn_idx = b.CreateAnd(L.warp(), L.i32(g.wn - 1));
  return g;
}

/// Stores tile t ([rows, cols], 16-bit) swizzled at `base` (shared), vectors of up to 8 elements. With
/// wgmma_rows (Wm, MT), the coordinates along dimension wgmma_dim go where wgmma_a_row puts them: A's rows
/// (dimension 0), or the columns of a transposed A's [K, M] source (dimension 1; groups of 8 columns move
/// whole, so vectors stay contiguous).
void stage_swizzled(Lowering &L, const Tile &t, ElemType et, llvm::Value *base,
                    std::optional<std::pair<int, int64_t>> wgmma_rows = std::nullopt, int wgmma_dim = 0) {
  auto &b = L.b;
  const Layout &l = *t.layout;
  int64_t cols = l.shape[1];
  if (cols < 8) L.fail(fmt::format("internal: a tensor-core operand needs at least 8 columns, got {}", cols));
  int64_t s = l.parent.size_per_thread[size_t(l.dims[1])];
  int64_t v = std::min<int64_t>({s, 8, cols});
  llvm::Type *mt = L.mem_type(et);
  auto *vt = llvm::FixedVectorType::get(mt, unsigned(v));
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    if (l.reg_is_duplicate(r) || l.reg_index(r)[1] % v) continue;
    llvm::Value *row = L.coord(l, 0, r), *col = L.coord(l, 1, r);
    if (wgmma_rows) {
      llvm::Value *&c = wgmma_dim == 0 ? row : col;
      c = wgmma_a_row(L, c, wgmma_rows->first, wgmma_rows->second);
    }
    llvm::Value *off = b.CreateOr(swizzled_chunk(L, row, b.CreateLShr(col, 3), cols, l.shape[0]), b.CreateAnd(col, 7));
    llvm::Value *vec = llvm::UndefValue::get(vt);
    for (int64_t j = 0; j < v; ++j) vec = b.CreateInsertElement(vec, t.regs[size_t(r + j)], uint64_t(j));
    b.CreateAlignedStore(vec, b.CreateInBoundsGEP(mt, base, off), llvm::Align(uint64_t(2 * v)));
  }
}

Frag ldmatrix(Lowering &L, llvm::Value *base, llvm::Value *elem_off, bool x4, bool trans) {
  auto &b = L.b;
  unsigned id = x4 ? (trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                            : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16)
                   : (trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16
                            : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16);
  llvm::Value *addr = b.CreateInBoundsGEP(b.getInt16Ty(), base, elem_off);
  // LLVM 19 declares ldmatrix overloaded on the pointer type; older ones take a shared pointer.
  llvm::Function *fn = llvm::Intrinsic::isOverloaded(llvm::Intrinsic::ID(id)) ? L.intrinsic(id, {addr->getType()})
                                                                             : L.intrinsic(id);
  llvm::Value *r = b.CreateCall(fn, {addr});
  Frag f{};
  for (unsigned i = 0; i < (x4 ? 4u : 2u); ++i) f[i] = b.CreateExtractValue(r, {i});
  return f;
}

/// A fragment of m16 tile mt, k16 tile kt from a swizzled [M,K] tile.
Frag load_a(Lowering &L, const Geometry &g, llvm::Value *base, int64_t mt, int64_t kt) {
  auto &b = L.b;
  llvm::Value *q = b.CreateLShr(L.lane(), 3), *r = b.CreateAnd(L.lane(), 7);
  llvm::Value *rep = b.CreateAdd(L.i32(2 * mt), b.CreateAnd(q, 1));
  llvm::Value *row = b.CreateAdd(b.CreateAdd(b.CreateShl(g.wm_idx, 3), r), b.CreateMul(rep, L.i32(8 * g.wm)));
  llvm::Value *chunk = b.CreateAdd(L.i32(2 * kt), b.CreateLShr(q, 1));
  return ldmatrix(L, base, swizzled_chunk(L, row, chunk, g.K, g.M), true, false);
}

/// A fragment of m16 tile mt, k16 tile kt of A = xᵀ from x, a swizzled [K,M] tile: ldmatrix.x4.trans of the
/// 8×8 blocks (k rows, m columns) that load_a would read from A.
Frag load_a_trans(Lowering &L, const Geometry &g, llvm::Value *base, int64_t mt, int64_t kt) {
  auto &b = L.b;
  llvm::Value *q = b.CreateLShr(L.lane(), 3), *r = b.CreateAnd(L.lane(), 7);
  llvm::Value *rep = b.CreateAdd(L.i32(2 * mt), b.CreateAnd(q, 1));
  llvm::Value *m_chunk = b.CreateAdd(g.wm_idx, b.CreateMul(rep, L.i32(g.wm)));  // in units of 8 columns
  llvm::Value *k_row = b.CreateAdd(L.i32(16 * kt), b.CreateAdd(b.CreateShl(b.CreateLShr(q, 1), 3), r));
  return ldmatrix(L, base, swizzled_chunk(L, k_row, m_chunk, g.M, g.K), true, true);
}

/// B fragments (2 registers each) of n8 tiles nt0 and nt0+1 (when it exists) for k16 tile kt, from a swizzled
/// [K,N] tile (transposing ldmatrix) or [N,K] tile (plain ldmatrix).
Frag load_b(Lowering &L, const Geometry &g, llvm::Value *base, bool nk, int64_t nt0, int64_t kt) {
  auto &b = L.b;
  bool x4 = nt0 + 1 < g.NT;
  llvm::Value *q = b.CreateLShr(L.lane(), 3), *r = b.CreateAnd(L.lane(), 7);
  llvm::Value *half = b.CreateAnd(q, 1);  // second k half
  llvm::Value *nt = L.i32(nt0);
  if (x4) nt = b.CreateAdd(nt, b.CreateLShr(q, 1));
  llvm::Value *n_chunk = b.CreateAdd(g.wn_idx, b.CreateMul(nt, L.i32(g.wn)));  // in units of 8 columns
  if (nk) {
    llvm::Value *row = b.CreateAdd(b.CreateShl(n_chunk, 3), r);
    llvm::Value *chunk = b.CreateAdd(L.i32(2 * kt), half);
    return ldmatrix(L, base, swizzled_chunk(L, row, chunk, g.K, g.N), x4, false);
  }
  llvm::Value *row = b.CreateAdd(L.i32(16 * kt), b.CreateAdd(r, b.CreateShl(half, 3)));
  return ldmatrix(L, base, swizzled_chunk(L, row, n_chunk, g.N, g.K), x4, true);
}

/// Two 16-bit register values packed into one i32 (the first in the low half).
llvm::Value *pack2(Lowering &L, llvm::Value *lo, llvm::Value *hi) {
  auto &b = L.b;
  auto *vt = llvm::FixedVectorType::get(lo->getType(), 2);
  llvm::Value *v = b.CreateInsertElement(llvm::UndefValue::get(vt), lo, uint64_t(0));
  v = b.CreateInsertElement(v, hi, uint64_t(1));
  return b.CreateBitCast(v, b.getInt32Ty());
}

/// A fragment of (mt, kt) from a tile in the MMA layout of [M,K] (whole rows per warp).
Frag a_from_regs(Lowering &L, const Tile &t, int64_t mt, int64_t kt) {
  int64_t per_row = t.layout->regs_along(1);
  auto reg = [&](int64_t ri, int64_t ci) { return t.regs[size_t(ri * per_row + ci)]; };
  Frag f{};
  for (int i = 0; i < 4; ++i) {
    int64_t ri = 2 * mt + (i & 1), ci = 4 * kt + 2 * (i >> 1);
    f[size_t(i)] = pack2(L, reg(ri, ci), reg(ri, ci + 1));
  }
  return f;
}

/// The value staged for a dot operand, and whether it is the operand transposed: the Trans source when the
/// Trans is folded (fold_transposes.h), b's [N,K] or a's [K,M], read transposed.
std::pair<const ir::Value *, bool> operand_source(Lowering &L, const ir::Value *v) {
  if (L.plan.folded.count(v)) return {v->def->operand(0), true};
  return {v, false};
}

llvm::Value *persistent(Lowering &L, const ir::Value *v) { return L.staged_for(v, /*tensor_core=*/true); }

/// The shared staging of a load copied there by a pipelined loop (this iteration's stage), or null.
llvm::Value *pipelined(Lowering &L, const ir::Value *v) {
  auto it = L.smem_operands.find(v);
  return it == L.smem_operands.end() ? nullptr : it->second;
}

/// acc (MMA layout registers) += a · b on wgmma. Each warpgroup issues, per k16 tile and m16 tile of its warps,
/// one m64nNk16 (K-major B, all N columns) or one per wgmma_instr_n columns (N-major B: the MN-major canonical
/// layout of PTX ISA 9.7.15.5.1 with 128-byte swizzle, its 64-column panels LBO bytes apart and its 8-row groups
/// along K SBO = 1024 bytes apart). All A fragments and the
/// accumulators are pinned in their registers before the fence (pin_registers), the accumulators again after
/// the wait.
std::vector<llvm::Value *> dot_wgmma(Lowering &L, const Geometry &g, std::vector<llvm::Value *> c, bool c_zero,
                                     const std::vector<llvm::Value *> *a_pre, const Tile *a_regs, llvm::Value *a_base,
                                     bool a_smem, bool a_trans, llvm::Value *b_base, bool b_nk, bool bf16, bool defer,
                                     bool chained, bool chained_from_last_iteration) {
  auto &b = L.b;
  std::vector<std::vector<Frag>> af(size_t(g.KT), std::vector<Frag>(size_t(g.MT)));
  llvm::Value *a_slabs = nullptr;
  // A's staged rows: 64-element panels of 128 bytes, or one panel of 16 or 32 elements (32- or 64-byte rows).
  // A transposed A's source [K, M] is staged in panels of 64 columns, K rows of 128 bytes each: one slab each.
  int64_t a_row_bytes = a_trans ? 128 : std::min<int64_t>(g.K, 64) * 2;
  int64_t a_slab_bytes = a_trans ? g.K * 128 : 64 * a_row_bytes;
  if (a_smem) {
    // A read by the wgmma from shared memory: this warpgroup's slabs (wgmma_a_row) start g·MT slabs in.
    a_slabs = b.CreateInBoundsGEP(b.getInt8Ty(), a_base,
                                  b.CreateMul(b.CreateLShr(L.warp(), 2), L.i32(g.MT * a_slab_bytes)));
  } else {
    for (int64_t kt = 0; kt < g.KT; ++kt)
      for (int64_t mt = 0; mt < g.MT; ++mt) {
        Frag &f = af[size_t(kt)][size_t(mt)];
        if (a_pre) for (int i = 0; i < 4; ++i) f[size_t(i)] = (*a_pre)[size_t((mt * g.KT + kt) * 4 + i)];
        else if (a_regs) f = a_from_regs(L, *a_regs, mt, kt);
        else f = load_a(L, g, a_base, mt, kt);
      }
    std::vector<llvm::Value *> a_regs_flat;
    for (auto &row : af)
      for (Frag &f : row)
        for (llvm::Value *&r : f)
          a_regs_flat.push_back(r->getType() == b.getInt32Ty() ? r : b.CreateBitCast(r, b.getInt32Ty()));
    pin_registers(L, a_regs_flat);
    for (size_t i = 0, n = 0; i < af.size(); ++i)
      for (Frag &f : af[i])
        for (llvm::Value *&r : f) r = a_regs_flat[n++];
  }
  int64_t per_row = 2 * g.NT;
  auto acc_reg = [&](int64_t mt, int64_t nt, int i) { return size_t((2 * mt + (i >> 1)) * per_row + 2 * nt + (i & 1)); };
  // A chained accumulator is still being written by the previous dot's wgmmas, which order themselves before
  // these (same registers and shape): reading it to pin it, or fencing, would wait for them. One carried from
  // the previous iteration fences all the same: in the first iteration ordinary instructions wrote it (the
  // loop's initial value), and the fence must stand between them and the wgmmas (PTX ISA 9.7.15.7.1, wgmma.fence); a fence
  // of each iteration is what CUTLASS's sm90 mainloops issue while a group runs.
  if (!chained) pin_registers(L, c);
  if (!chained || chained_from_last_iteration) wgmma_fence(L);
  for (int64_t kt = 0; kt < g.KT; ++kt)
    for (int64_t mt = 0; mt < g.MT; ++mt) {
      const int64_t n = wgmma_instr_n(g.N, b_nk, a_smem), panel_bytes = g.K * 128;
      for (int64_t p = 0; p < g.N / n; ++p) {
        // Byte offset of this instruction's B: K-major [N, K] in panels of 64 k (128-byte rows), the k16 slice
        // 32 bytes into the row; N-major [K, N] in panels of 64 n, instruction p's first panel, the k16 slice 16
        // rows down. The panel stride (LBO) is read only by an instruction spanning several panels (K-major:
        // never); the unread field is written as it always was.
        int64_t off = b_nk ? (kt / 4) * g.N * 128 + (kt % 4) * 32 : p * (n / 64) * panel_bytes + kt * 16 * 128;
        llvm::Value *desc = wgmma_descriptor(L, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), b_base, uint64_t(off)),
                                             /*lbo=*/b_nk ? 16 : n > 64 ? panel_bytes : 1024, /*sbo=*/1024);
        std::vector<llvm::Value *> sub;
        for (int64_t q = 0; q < n / 2; ++q) sub.push_back(c[acc_reg(mt, p * (n / 8) + q / 4, int(q % 4))]);
        if (a_smem) {
          // K-major A: panels of 64 k (M rows of 128 bytes each), slab mt, the k16 slice 32 bytes into the row.
          // M-major A (a_trans): slab mt's panel, the k16 slice 16 rows down, as an N-major B.
          int64_t a_off = a_trans ? mt * a_slab_bytes + kt * 16 * 128
                                  : (kt / 4) * g.M * 128 + mt * 64 * a_row_bytes + (kt % 4) * 32;
          llvm::Value *a_at = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), a_slabs, uint64_t(a_off));
          llvm::Value *a_desc = a_trans ? wgmma_descriptor(L, a_at, /*lbo=*/1024, /*sbo=*/1024)
                                        : wgmma_descriptor(L, a_at, /*lbo=*/16, /*sbo=*/8 * a_row_bytes, a_row_bytes);
          sub = wgmma_ss(L, int(n), bf16, a_desc, desc, /*trans_b=*/!b_nk, sub, /*accumulate=*/kt > 0 || !c_zero,
                         a_trans);
        } else {
          sub = wgmma_rs(L, int(n), bf16, af[size_t(kt)][size_t(mt)], desc, /*trans_b=*/!b_nk, sub,
                         /*accumulate=*/kt > 0 || !c_zero);
        }
        for (int64_t q = 0; q < n / 2; ++q) c[acc_reg(mt, p * (n / 8) + q / 4, int(q % 4))] = sub[size_t(q)];
      }
    }
  if (defer) {
    wgmma_commit(L);
    L.dot_left_pending = true;
    L.dot_pending_n = int(wgmma_instr_n(g.N, b_nk, a_smem));
  } else {
    wgmma_commit_and_wait(L, c);
  }
  return c;
}

}  // namespace

/// The shared-memory row of logical row `row` of an A operand staged for wgmma: the MMA layout gives warp w
/// (warpgroup g = w/4, w' = w%4) rows 8·w + i + 8·Wm·rep (i < 8, rep = 2·mt + h); wgmma reads warp w''s rows
/// 16·w' + 8·h + i of the 64-row slab of instruction (g, mt). Slabs are stored in the order (g, mt).
llvm::Value *wgmma_a_row(Lowering &L, llvm::Value *row, int wm, int64_t mt_count) {
  auto &b = L.b;
  llvm::Value *i = b.CreateAnd(row, 7), *grp = b.CreateLShr(row, 3);
  llvm::Value *w = b.CreateAnd(grp, L.i32(wm - 1)), *rep = b.CreateLShr(grp, log2_exact(wm));
  llvm::Value *mt = b.CreateLShr(rep, 1), *h = b.CreateAnd(rep, 1);
  llvm::Value *slab = b.CreateAdd(b.CreateMul(b.CreateLShr(w, 2), L.i32(mt_count)), mt);
  llvm::Value *in_slab = b.CreateOr(b.CreateShl(b.CreateAnd(w, 3), 4), b.CreateOr(b.CreateShl(h, 3), i));
  return b.CreateOr(b.CreateShl(slab, 6), in_slab);
}

bool runs_on_wgmma(Lowering &L, const ir::Op &dot) {
  return dot_runs_on_wgmma(dot, L.use_wgmma, L.opts.num_warps, L.plan.folded);
}

std::optional<std::pair<int, int64_t>> wgmma_a_order(Lowering &L, const ir::Op &dot) {
  return wgmma_a_order(dot, L.use_wgmma, L.opts.num_warps, L.plan.folded);
}

void stage_mma_operand(Lowering &L, const StagedOperand &s, llvm::Value *at) {
  stage_swizzled(L, L.get(s.source), s.source->type.elem, at, s.wgmma_rows);
}

void preload_mma_fragments(Lowering &L, const ir::Op &dot) {
  const ir::Value *av = dot.operand(0);
  llvm::Value *base = persistent(L, av);
  if (!base || L.mma_a_fragments.count(av) || L.use_wgmma)
    L.fail("internal: the plan preloads the fragments of an A operand that is not staged, or already preloaded");
  auto l = mma_layout(dot.result()->type.shape, L.opts.num_warps);
  Geometry g = geometry(L, *l, av->type.shape[1]);
  std::vector<llvm::Value *> regs;
  for (int64_t mt = 0; mt < g.MT; ++mt)
    for (int64_t kt = 0; kt < g.KT; ++kt)
      for (llvm::Value *r : load_a(L, g, base, mt, kt)) regs.push_back(r);
  L.mma_a_fragments[av] = std::move(regs);
  if (L.notes) L.note("loads a loop-invariant A operand's fragments into registers once, before the loop (ldmatrix)");
}

Tile lower_dot_mma(Lowering &L, const ir::Op &op) {
  auto &b = L.b;
  const ir::Value *av = op.operand(0), *bv = op.operand(1), *cv = op.operand(2), *res = op.result();
  const Layout &l = L.layout_of(res);
  auto want = mma_layout(res->type.shape, L.opts.num_warps);
  if (!want || !(l == *want)) L.fail("internal: a tensor-core dot's result is not in the MMA layout");
  Geometry g = geometry(L, l, av->type.shape[1]);
  bool bf16 = av->type.dtype() == DType::bf16;
  auto [bsrc, b_nk] = operand_source(L, bv);
  // A = trans(x) folded: x [K, M] is staged as it is and read transposed.
  auto [asrc, a_trans] = operand_source(L, av);

  // Where each operand's fragments come from.
  const std::vector<llvm::Value *> *a_pre = nullptr;
  if (auto it = L.mma_a_fragments.find(av); it != L.mma_a_fragments.end()) a_pre = &it->second;
  const Tile *a_regs = nullptr;
  llvm::Value *a_base = nullptr, *b_base = persistent(L, bv);
  if (!b_base) b_base = pipelined(L, bsrc);
  if (!a_pre && !a_trans) a_base = pipelined(L, av);
  if (!a_pre && !a_base) a_base = persistent(L, av);  // staged before the loop (even if also in registers)
  if (!a_pre && !a_base && !a_trans) {
    const Tile &ta = L.get(av);
    if (ta.is_scalar()) L.fail("dot operands must be tiles");
    if (a_in_mma_registers(*ta.layout, L.opts.num_warps)) a_regs = &ta;
  }
  bool stage_a = !a_pre && !a_regs && !a_base, stage_b = !b_base;
  // wgmma reads B through a descriptor: from a stage buffer, staged 1024-byte aligned before the loop, or
  // staged here in the (1024-byte aligned) dynamic buffer. Loop-invariant operands are staged once for every
  // dot reading them, in the form the first of them wanted: a B staged for ldmatrix is restaged here for
  // wgmma, and an A staged in wgmma's row order is restaged here (or read from registers) by a dot that
  // cannot use wgmma.
  bool wg = runs_on_wgmma(L, op);
  if (wg && persistent(L, bv) && !L.staged_as(bv, StagedOperand::Form::WgmmaB)) b_base = nullptr, stage_b = true;
  if (!wg && !a_pre && L.staged_as(av, StagedOperand::Form::WgmmaA)) {
    a_base = nullptr;
    const Tile &ta = L.get(av);
    if (ta.is_scalar()) L.fail("dot operands must be tiles");
    a_regs = a_in_mma_registers(*ta.layout, L.opts.num_warps) ? &ta : nullptr;
    stage_a = !a_regs;
  }
  if (!wg && L.wgmma_stage_a.count(av)) L.fail("internal: an A stage buffer in wgmma's row order read by mma.sync");
  // The accumulator: a running wgmma dot's result read only here is continued without a wait (chained) when
  // this dot reads A from shared memory too (no register of it to fence) and issues wgmmas of the same shape.
  bool a_smem = wg && (L.staged_as(av, StagedOperand::Form::WgmmaA) || L.wgmma_stage_a.count(av) != 0 || a_trans);
  std::optional<Tile> chained;
  bool chained_from_last_iteration = false;
  if (wg && a_smem && !stage_a && L.use_count(cv) == 1)
    chained = L.take_pending(cv, int(wgmma_instr_n(g.N, b_nk, a_smem)), &chained_from_last_iteration);
  Tile acc = chained ? *chained : L.get_in(cv, l);
  if (!acc.layout || !(*acc.layout == l)) L.fail("internal: a chained wgmma accumulator is not in the MMA layout");
  if (L.notes) {
    auto from = [&](const ir::Value *v, bool staged_here) -> std::string {
      if (staged_here) return "shared memory staged here";
      if (const PipelinedLoad *ld = v->def ? L.plan.pipelined(v->def) : nullptr)
        return ld->tma ? "the loop's stage buffer (TMA)" : "the loop's cp.async stage buffer";
      return "shared memory staged before the loop";
    };
    // A: fragments loaded once before the loop, registers in the MMA layout, shared memory read by wgmma's
    // descriptor, or shared memory read into registers with ldmatrix (mma.sync, and wgmma's register form).
    std::string a = a_pre    ? std::string("registers loaded with ldmatrix before the loop")
                    : a_regs ? std::string("registers")
                    : a_smem ? from(av, stage_a) + " through a descriptor"
                             : from(av, stage_a) + ", read into registers with ldmatrix";
    if (a_trans) a += ", transposed";
    const std::string bs = from(bsrc, stage_b) + (b_nk ? "" : ", N-major") + (wg ? "" : ", read with ldmatrix");
    if (wg)
      L.note(fmt::format("wgmma m64n{}k16 (A from {}; B from {}); {}{}", wgmma_instr_n(g.N, b_nk, a_smem), a, bs,
                         !stage_a && !stage_b ? "not waited for at once: at its result's first use, at the "
                                                "iteration's end (or, when the plan leaves it running into the next "
                                                "iteration, at the loop's exit), or not at all when the next dot "
                                                "continues it"
                                              : "waited at once (its operands sit in the scratch space)",
                         !chained                      ? ""
                         : chained_from_last_iteration ? "; continues the previous iteration's running accumulator "
                                                         "without a wait"
                                                       : "; continues the running accumulator without a wait"));
    else
      L.note(fmt::format("mma.sync m16n8k16 (A from {}; B from {})", a, bs));
  }
  if (stage_a || stage_b) {
    int64_t a_bytes = stage_a ? g.M * g.K * 2 : 0;
    // A read by a wgmma descriptor starts on a 1024-byte boundary too (the dynamic buffer's start is one).
    int64_t a_off = wg && a_smem ? (1024 - L.scratch_offset % 1024) % 1024 : 0;
    int64_t b_off = (a_off + a_bytes + 127) / 128 * 128;
    if (wg) b_off = align_up(L.scratch_offset + a_off + a_bytes, 1024) - L.scratch_offset;
    L.reserve_smem(b_off + (stage_b ? g.K * g.N * 2 : 0));
    if (stage_a) a_base = L.smem_addr(L.i32(0), b.getInt8Ty(), a_off);
    if (stage_b) b_base = L.smem_addr(L.i32(0), b.getInt8Ty(), b_off);
    L.barrier();
    if (stage_a && a_trans) {
      const Tile &tx = L.get(asrc);
      if (tx.is_scalar()) L.fail("dot operands must be tiles");
      std::optional<std::pair<int, int64_t>> order;
      if (wg) order = std::make_pair(g.wm, g.MT);
      stage_swizzled(L, tx, asrc->type.elem, a_base, order, /*wgmma_dim=*/1);
    } else if (stage_a) {
      stage_swizzled(L, L.get(av), av->type.elem, a_base);
    }
    if (stage_b) {
      const Tile &tb = L.get(bsrc);
      if (tb.is_scalar()) L.fail("dot operands must be tiles");
      stage_swizzled(L, tb, bsrc->type.elem, b_base);
    }
    L.barrier();
  }

  if (wg) {
    // A zero accumulator (attention's s = q·kᵀ) is not materialized: the first wgmma of each tile has scale-d 0.
    bool zero = !chained && is_zero_tile(cv);
    std::vector<llvm::Value *> c0 = acc.regs;
    if (zero) std::fill(c0.begin(), c0.end(), llvm::UndefValue::get(b.getFloatTy()));
    // Operands staged in the scratch space must not be overwritten by later conversions while the group
    // runs: only dots reading registers, stage buffers or static shared memory leave their wait for later.
    bool defer = !stage_a && !stage_b;
    return Tile{l, dot_wgmma(L, g, c0, zero, a_pre, a_regs, a_base, a_smem, a_trans, b_base, b_nk,
                             bf16, defer, chained.has_value(), chained_from_last_iteration)};
  }

  llvm::Function *mma = L.intrinsic(bf16 ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16
                                         : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32);
  llvm::FunctionType *fty = mma->getFunctionType();
  std::vector<llvm::Value *> c = acc.regs;
  int64_t per_row = l.regs_along(1);  // 2·NT
  auto acc_reg = [&](int64_t mt, int64_t nt, int i) { return size_t((2 * mt + (i >> 1)) * per_row + 2 * nt + (i & 1)); };
  for (int64_t kt = 0; kt < g.KT; ++kt) {
    std::vector<Frag> af(size_t(g.MT));
    for (int64_t mt = 0; mt < g.MT; ++mt) {
      if (a_pre) for (int i = 0; i < 4; ++i) af[size_t(mt)][size_t(i)] = (*a_pre)[size_t((mt * g.KT + kt) * 4 + i)];
      else if (a_regs) af[size_t(mt)] = a_from_regs(L, *a_regs, mt, kt);
      else if (a_trans) af[size_t(mt)] = load_a_trans(L, g, a_base, mt, kt);
      else af[size_t(mt)] = load_a(L, g, a_base, mt, kt);
    }
    std::vector<std::array<llvm::Value *, 2>> bf(size_t(g.NT));
    for (int64_t nt = 0; nt < g.NT; nt += 2) {
      Frag f = load_b(L, g, b_base, b_nk, nt, kt);
      bf[size_t(nt)] = {f[0], f[1]};
      if (nt + 1 < g.NT) bf[size_t(nt + 1)] = {f[2], f[3]};
    }
    for (int64_t mt = 0; mt < g.MT; ++mt)
      for (int64_t nt = 0; nt < g.NT; ++nt) {
        std::vector<llvm::Value *> args;
        for (int i = 0; i < 4; ++i) args.push_back(af[size_t(mt)][size_t(i)]);
        for (int i = 0; i < 2; ++i) args.push_back(bf[size_t(nt)][size_t(i)]);
        for (int i = 0; i < 4; ++i) args.push_back(c[acc_reg(mt, nt, i)]);
        for (unsigned i = 0; i < args.size(); ++i)
          if (args[i]->getType() != fty->getParamType(i)) args[i] = b.CreateBitCast(args[i], fty->getParamType(i));
        llvm::Value *d = b.CreateCall(mma, args);
        for (int i = 0; i < 4; ++i) c[acc_reg(mt, nt, i)] = b.CreateExtractValue(d, {unsigned(i)});
      }
  }
  return Tile{l, c};
}

}  // namespace tilejit::codegen
