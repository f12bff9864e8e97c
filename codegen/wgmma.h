// Hopper warpgroup MMA (wgmma, sm_90a) through inline PTX: LLVM 19 has no wgmma intrinsics.
// PTX ISA 8.5, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (9.7.15).
//
// Two forms of wgmma.mma_async m64nNk16 with f32 accumulators and f16/bf16 operands: A in registers and B in
// shared memory (wgmma_rs), or both in shared memory (wgmma_ss). A warpgroup (4 consecutive warps) computes a
// [64, N] tile; warp w of the group holds rows 16w..16w+15 with the register layout of mma.sync m16n8k16 (the
// A fragment and, per n8 column block, the C fragment), so the MMA accumulator layout of codegen/mma.h (warps
// tiling M only) is what wgmma produces. B, and A in the SS form, are read through 64-bit matrix descriptors
// from tiles staged with swizzled_offset at 1024-byte aligned addresses ("128-byte swizzle", 64 columns per
// panel; an A of 16 or 32 columns uses the 32- or 64-byte swizzle).
#pragma once
#include <array>
#include <vector>

#include "codegen/lowering.h"

namespace tilejit::codegen {

/// wgmma.fence.sync.aligned: orders the warpgroup's earlier register writes before the wgmmas that follow.
void wgmma_fence(Lowering &L);
/// wgmma.commit_group.sync.aligned then wgmma.wait_group.sync.aligned 0, after which each of `regs` (the
/// accumulators) is pinned (pin_registers) so that no use of them can move above the wait.
void wgmma_commit_and_wait(Lowering &L, std::vector<llvm::Value *> &regs);
/// wgmma.commit_group.sync.aligned alone (a deferred dot: Lowering::defer_wgmma); counts the group.
void wgmma_commit(Lowering &L);
/// wgmma.wait_group.sync.aligned `pending` (0..7): waits until at most `pending` of the newest groups are in
/// flight; groups complete in commit order (PTX ISA 9.7.15.7.3).
void wgmma_wait(Lowering &L, int pending);
/// Passes each of `regs` (f32 or b32) through an empty volatile asm with a tied operand. Before wgmma_fence
/// this materializes the accumulators and A fragments in their registers ahead of the fence: otherwise LLVM
/// may place the copies that feed the wgmma's tied operands (or the A fragments' packing) after the fence,
/// and registers a wgmma reads must not be written between the fence and the wgmma.
void pin_registers(Lowering &L, std::vector<llvm::Value *> &regs);
/// fence.proxy.async.shared::cta: makes this thread's generic-proxy writes to shared memory (st.shared,
/// cp.async) visible to the async proxy that wgmma reads through. Emitted before barriers.
void fence_proxy_async(Lowering &L);
/// The matrix descriptor (i64) of a swizzled operand at shared pointer `smem` whose rows are `row_bytes`
/// long (128, 64 or 32: the 128-, 64- or 32-byte swizzle, modes 1, 2, 3 of PTX ISA 9.7.15.5.1; atoms of 8
/// rows, 1024-byte aligned for 128): start address, leading and stride byte offsets (multiples of 16).
llvm::Value *wgmma_descriptor(Lowering &L, llvm::Value *smem, int64_t lbo, int64_t sbo, int64_t row_bytes = 128);
/// One wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{bf16|f16}: acc (n/2 f32, the per-thread order of the
/// PTX ISA's "Register Fragments" figure for D) += a (4 × b32 holding 8 operand elements) · B(desc), B
/// transposed (N-major in shared memory) when trans_b; with accumulate false (scale-d = 0) acc's values are
/// ignored and D = A·B. Returns the new accumulators.
std::vector<llvm::Value *> wgmma_rs(Lowering &L, int n, bool bf16, const std::array<llvm::Value *, 4> &a,
                                    llvm::Value *desc, bool trans_b, const std::vector<llvm::Value *> &acc,
                                    bool accumulate = true);

/// The same with A read from shared memory too (`a_desc`): the "SS" form. A is K-major, or M-major when
/// trans_a (transpose-a 1, f16/bf16 only: PTX ISA 9.7.15.5.1, the same canonical layout as an N-major B).
std::vector<llvm::Value *> wgmma_ss(Lowering &L, int n, bool bf16, llvm::Value *a_desc, llvm::Value *b_desc,
                                    bool trans_b, const std::vector<llvm::Value *> &acc, bool accumulate = true,
                                    bool trans_a = false);

}  // namespace tilejit::codegen
