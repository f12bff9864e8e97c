#include "codegen/mma.h"

#include <algorithm>

namespace tilejit::codegen {

std::optional<Layout> mma_layout(const std::vector<int64_t> &shape, int num_warps) {
  if (num_warps < 1 || shape.size() != 2 || !is_pow2(shape[0]) || !is_pow2(shape[1]) || shape[0] < 16)
    return std::nullopt;
  int wm = int(std::min<int64_t>(num_warps, shape[0] / 16));
  int wn = num_warps / wm;
  if (shape[1] < 8 * int64_t(wn)) return std::nullopt;
  Layout l;
  l.parent.size_per_thread = {1, 2};
  l.parent.threads_per_warp = {8, 4};
  l.parent.warps_per_cta = {wm, wn};
  l.parent.order = {1, 0};
  l.dims = {0, 1};
  l.shape = shape;
  return l;
}

bool dot_uses_mma(const ir::Op &dot, int num_warps) {
  if (dot.kind != ir::OpKind::Dot || dot.num_operands() < 3) return false;
  const ir::Type &a = dot.operand(0)->type, &b = dot.operand(1)->type, &r = dot.result()->type;
  if (a.rank() != 2 || b.rank() != 2 || r.rank() != 2 || a.is_ptr() || b.is_ptr()) return false;
  DType da = a.dtype(), db = b.dtype();
  if (da != db || (da != DType::f16 && da != DType::bf16)) return false;
  if (r.dtype() != DType::f32 || a.shape[1] % 16 != 0 || !is_pow2(a.shape[1]) || !is_pow2(b.shape[1])) return false;
  return mma_layout(r.shape, num_warps).has_value();
}

bool wgmma_shape_ok(int wm, int wn, int64_t K, int64_t N, bool b_nk, int num_warps) {
  if (wn != 1 || num_warps % 4 != 0 || wm != num_warps) return false;
  return b_nk ? K % 64 == 0 && N % 8 == 0 && N <= 256 : N % 64 == 0 && K % 16 == 0;
}

bool dot_fits_wgmma(const ir::Op &dot, bool b_nk, int num_warps) {
  if (!dot_uses_mma(dot, num_warps)) return false;
  auto l = mma_layout(dot.result()->type.shape, num_warps);
  return wgmma_shape_ok(l->parent.warps_per_cta[0], l->parent.warps_per_cta[1], dot.operand(0)->type.shape[1],
                        dot.result()->type.shape[1], b_nk, num_warps);
}

bool kernel_uses_wgmma(const ir::Function &fn, const CodegenOptions &opts) {
  return opts.wgmma && opts.arch == "sm_90a" && kernel_may_use_wgmma(fn, opts.num_warps);
}

bool dot_runs_on_wgmma(const ir::Op &dot, bool use_wgmma, int num_warps,
                       const std::unordered_set<const ir::Value *> &folded) {
  return use_wgmma && dot.kind == ir::OpKind::Dot && dot_uses_mma(dot, num_warps) &&
         dot_fits_wgmma(dot, folded.count(dot.operand(1)) != 0, num_warps);
}

std::optional<std::pair<int, int64_t>> wgmma_a_order(const ir::Op &dot, bool use_wgmma, int num_warps,
                                                     const std::unordered_set<const ir::Value *> &folded) {
  // A folded trans(x) is read through its own [K, M] staging (a_trans), not in this row order.
  if (!dot_runs_on_wgmma(dot, use_wgmma, num_warps, folded) || folded.count(dot.operand(0))) return std::nullopt;
  auto l = mma_layout(dot.result()->type.shape, num_warps);
  int wm = l->parent.warps_per_cta[0];
  return std::make_pair(wm, l->shape[0] / (16 * int64_t(wm)));
}

bool kernel_may_use_wgmma(const ir::Function &fn, int num_warps) {
  bool any = false;
  ir::walk(const_cast<ir::Block &>(*fn.body), [&](ir::Op &op) {
    any = any || dot_fits_wgmma(op, true, num_warps) || dot_fits_wgmma(op, false, num_warps);
  });
  return any;
}

int64_t swizzle_phase(int64_t row, int64_t cols) {
  int64_t chunks = cols / 8;
  int64_t rows_per_line = std::max<int64_t>(1, 8 / chunks);  // rows sharing one 128-byte line
  return (row / rows_per_line) & (std::min<int64_t>(8, chunks) - 1);
}

int64_t swizzled_offset(int64_t row, int64_t col, int64_t cols, int64_t rows) {
  int64_t panel_cols = std::min<int64_t>(cols, 64);
  int64_t panel = col / panel_cols;
  col %= panel_cols;
  int64_t chunk = (col / 8) ^ swizzle_phase(row, panel_cols);
  return panel * rows * panel_cols + row * panel_cols + chunk * 8 + col % 8;
}

bool a_in_mma_registers(const Layout &a, int num_warps) {
  auto want = mma_layout(a.shape, num_warps);
  return want && want->parent.warps_per_cta[1] == 1 && same_distribution(a, *want);
}

int64_t wgmma_instr_n(int64_t N, bool b_nk, bool a_smem) {
  if (b_nk) return N;
  if (!a_smem) return 64;
  return std::min<int64_t>(N, 256);  // N is a power of two (dot_uses_mma)
}

}  // namespace tilejit::codegen
