// Tensor-core (mma.sync m16n8k16) support shared by layout assignment and the dot lowering. Pure; no LLVM.
//
// The MMA accumulator layout is a blocked layout (codegen/layout.h), so elementwise ops, row reductions and
// row broadcasts work on it unchanged: spt = [1, 2], tpw = [8, 4], wpc = [Wm, Wn], order = [1, 0]. Lane l
// holds rows l/4 (+ 8·Wm·rep) and columns 2·(l%4) + {0,1} (+ 8·Wn·rep): exactly the C fragment of
// m16n8k16, where a warp's m16 tile mt is made of its row repetitions 2·mt and 2·mt+1 (rows 8·wm + i and
// 8·wm + 8·Wm + i, i < 8) and its n8 tile nt is column repetition nt (columns 8·wn + 8·Wn·nt + j). The
// A operand's rows and the B operand's columns are read in that same order (ldmatrix takes one row
// address per lane, so the rows of an m16 tile need not be contiguous).
//
// Warps tile M first: Wm = min(num_warps, M/16), Wn = num_warps/Wm; the layout exists when M ≥ 16 and
// N ≥ 8·Wn.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/codegen.h"

#include "codegen/layout.h"
#include "ir/ir.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

/// The MMA accumulator layout of a [M, N] tile, or nullopt when the shape is too small for num_warps.
TILEJIT_EXPORT std::optional<Layout> mma_layout(const std::vector<int64_t> &shape, int num_warps);

/// True when a tile in layout `a` is an A operand already in MMA registers: the MMA layout of its [M, K] with
/// every warp holding whole rows (attention's p → dot(p, v): no staging).
TILEJIT_EXPORT bool a_in_mma_registers(const Layout &a, int num_warps);

/// True when `dot` (an OpKind::Dot) lowers to mma.sync: both operands f16 or both bf16, rank 2, K a
/// multiple of 16, and an MMA layout exists for its [M, N] result. Other dots keep the f32 FMA path.
TILEJIT_EXPORT bool dot_uses_mma(const ir::Op &dot, int num_warps);

/// The dot's shape fits wgmma: warps tile M only (wm × wn warps of the MMA layout, wn = 1), whole warpgroups,
/// and B in 128-byte-swizzled panels (K-major B, b_nk: K a multiple of 64 and N ≤ 256; N-major B: N a multiple
/// of 64). PTX ISA 8.5, §9.7.15 (wgmma.mma_async).
TILEJIT_EXPORT bool wgmma_shape_ok(int wm, int wn, int64_t K, int64_t N, bool b_nk, int num_warps);

/// True when `dot` lowers to mma.sync (dot_uses_mma) with a shape wgmma takes, B K-major (b_nk) or N-major.
TILEJIT_EXPORT bool dot_fits_wgmma(const ir::Op &dot, bool b_nk, int num_warps);

/// True when some dot of the kernel may be issued as wgmma (sm_90a): a dot_uses_mma dot whose shape fits
/// wgmma with either orientation of B. Only such kernels pay for what wgmma needs around every barrier (the
/// async-proxy fence) and in their shared memory (1024-byte aligned buffers); the others lower as on sm_80.
TILEJIT_EXPORT bool kernel_may_use_wgmma(const ir::Function &fn, int num_warps);
/// Whether the kernel's qualifying dots are issued as wgmma: sm_90a, opts.wgmma and kernel_may_use_wgmma.
TILEJIT_EXPORT bool kernel_uses_wgmma(const ir::Function &fn, const CodegenOptions &opts);
/// Whether `dot` is issued as wgmma in a kernel that uses it (use_wgmma): a dot_uses_mma dot whose shape fits,
/// with B K-major when B is a folded transpose (in `folded`, fold_transposes.h) and N-major otherwise.
TILEJIT_EXPORT bool dot_runs_on_wgmma(const ir::Op &dot, bool use_wgmma, int num_warps,
                                      const std::unordered_set<const ir::Value *> &folded);
/// The N of the wgmma instructions of a dot with a [*, N] result: all N columns for a K-major B. For an N-major B
/// (stored as 64-column panels) with A in shared memory (a_smem), as many whole panels as one instruction takes
/// (N ≤ 256): each instruction reads its A from shared memory again, so A is read once
/// per 256 columns instead of once per panel. With A in registers there is nothing to re-read: one instruction per
/// panel, which ties fewer accumulators to one asm statement (ptxas then needs fewer registers: a 4-byte spill
/// of attention's d128 forward at two programs per SM otherwise). PTX ISA 8.5, 9.7.15.5.1 (the MN-major canonical
/// layouts: the 64-column panels LBO bytes apart).
TILEJIT_EXPORT int64_t wgmma_instr_n(int64_t N, bool b_nk, bool a_smem);
/// (wm, m16 tiles per warp) of the row order in which a wgmma dot reads an A operand from shared memory (the MMA
/// layout's rows, warps along M), when `dot` runs on wgmma and its A is not a folded transpose; nullopt otherwise.
TILEJIT_EXPORT std::optional<std::pair<int, int64_t>> wgmma_a_order(const ir::Op &dot, bool use_wgmma, int num_warps,
                                                                    const std::unordered_set<const ir::Value *> &folded);

/// Element offset of (row, col) in a [rows, cols] tile of 16-bit elements staged in shared memory with its
/// 16-byte chunks XOR-swizzled by row, so that the 8 row addresses of one ldmatrix 8x8 matrix (8 consecutive
/// rows starting at a multiple of 8, one chunk) fall in 8 distinct bank groups. cols must be a power of two
/// ≥ 8. Up to 64 columns the tile is row-major; wider tiles are stored as cols/64 panels of [rows, 64], one
/// after the other. Either way, at a 1024-byte aligned base this is exactly the layout the wgmma shared-memory
/// descriptor calls "128-byte swizzle" (64 columns), "64-byte" (32) and "32-byte" (16): PTX ISA 8.5,
/// "Asynchronous Warpgroup Level Matrix Shared Memory Layout".
TILEJIT_EXPORT int64_t swizzled_offset(int64_t row, int64_t col, int64_t cols, int64_t rows);
/// The XOR applied to chunk indices of `row` (see swizzled_offset).
TILEJIT_EXPORT int64_t swizzle_phase(int64_t row, int64_t cols);

}  // namespace tilejit::codegen
