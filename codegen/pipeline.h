// Software pipelining of a `for` loop's tensor-core operand loads with cp.async (sm_80+).
//
// A load in the loop body whose only uses are operands of tensor-core dots in that body (directly, or as
// the b operand through a folded Trans) is not lowered to registers: its tile goes global → shared with
// 16-byte cp.async straight into the swizzled staging the dot reads (with ldmatrix, or by wgmma's descriptor:
// stage buffers are then 1024-byte aligned; an A read by wgmma has its rows copied in wgmma's order). With
// S = num_stages buffers per load:
//   prologue:     barrier; issue iterations 0..S-2 into buffers 0..S-2 (one commit group each)
//   iteration i:  cp.async.wait_group S-2 (iteration i's group has landed); barrier (its data is visible, and
//                 every thread is done reading buffer (i-1) mod S); issue iteration i+S-1 into that buffer;
//                 the dots (and the staged reads below) read buffer i mod S
//   exit:         cp.async.wait_group 0 (no copy may land in shared memory reused after the loop)
// Iterations past the upper bound and masked-off 16-byte chunks are zero-filled (src-size 0: nothing is
// read from global memory). Pointers and masks of a later iteration are computed by re-lowering their
// address computation (ops of the body that depend only on the induction variable and values from outside
// the loop) with the induction variable advanced.
//
// Small loads read by other ops (at most kMaxStagedValueElems elements of f32 or i32, any rank, any mask and
// `other`: a key-major backward's per-query logsumexp and delta) ride in the same stages when the loop pipelines
// dot operands anyway: each element goes global → shared with a 4-byte cp.async issued with its stage,
// zero-filled where masked, and the load is lowered where it stands as a read of this iteration's stage buffer
// in the result's layout (`other` selected where masked). Its global latency and its masked-off branches leave
// the body's critical path; its address arithmetic moves to the stage's issue. Only loads at the body's top
// level whose address depends on the induction variable, and only when: no address of the pipeline depends on
// them (an index load is re-lowered by the slice instead), no store or atomic in the body (nested regions
// included) writes through the same pointer parameter or through one not traced to a parameter (the copy runs
// S-1 iterations ahead of those writes), and their buffers do not cost the pipeline a stage.
//
// The address slice may also contain unmasked scalar loads (a block-sparse loop's `load(list + i)`): they are
// re-lowered too, executed only when that iteration is in range (0 otherwise).
//
// Requirements checked by plan_pipeline (otherwise the loop keeps the register path): no acquire-release
// atomic in the body (the copies run ahead of it), num_stages ≥ 2, arch
// ≥ sm_80, a rank-2 f16/bf16 tile with ≥ 8 columns, pointers proven contiguous and 16-byte aligned in
// groups of 8 elements along the last dim (axis info), a mask constant over those groups, `other` zero.
#pragma once
#include <optional>
#include <vector>

#include "codegen/lowering.h"

namespace tilejit::codegen {

struct PipelinedLoad {
  const ir::Op *load = nullptr;
  int64_t rows = 0, cols = 0;  // tile shape
  int64_t offset = 0;          // byte offset of its buffer inside one stage
  /// Only an untransposed A of wgmma dots: its rows go where wgmma_a_row puts them (wm, m16 tiles per warp),
  /// so that the wgmma reads A from the stage buffer through a descriptor instead of registers.
  std::optional<std::pair<int, int64_t>> wgmma_a_rows;
  /// Read into registers where the load stands (read_staged_load) rather than by dots; its stage buffer holds
  /// the tile row-major, 4 bytes per element (rows = its element count, cols = 1).
  bool to_registers = false;
};

/// The most elements of a load staged for other ops than dots (4-byte copies by the owner of each element of the
/// default layout: e.g. 16 threads of 4 elements for 64).
inline constexpr int64_t kMaxStagedValueElems = 256;

struct LoopPipeline {
  int stages = 2;
  int64_t stage_bytes = 0;                  // bytes of one stage (all loads' buffers)
  int64_t base = 0;                         // byte offset of stage 0 in dynamic shared memory
  std::vector<PipelinedLoad> loads;
  std::vector<const ir::Op *> slice;        // body ops the pointers and masks depend on, in body order
  int64_t end() const { return base + stages * stage_bytes; }
};

/// The pipeline of for_op's body, or nullopt when nothing qualifies (see the header comment).
std::optional<LoopPipeline> plan_pipeline(Lowering &L, const ir::Op &for_op);
/// Issues the copies of the iteration whose induction variable is `iv` into stage `stage` (i32), zero-filled
/// where `valid` (i1) is false, and commits them as one group. Leaves the induction variable unbound.
void issue_stage(Lowering &L, const ir::Op &for_op, const LoopPipeline &p, llvm::Value *iv, llvm::Value *valid,
                 llvm::Value *stage);
/// Makes the dots and staged reads read stage `stage` (i32) of every pipelined load.
void bind_stage(Lowering &L, const LoopPipeline &p, llvm::Value *stage);
/// The registers of a load staged `to_registers`, read from its buffer of the stage bound last (bind_stage) in
/// the load's layout, `other` where its mask is false.
Tile read_staged_load(Lowering &L, const ir::Op &load);
/// cp.async.wait_group: waits until at most `pending` committed groups of this thread are in flight.
void wait_copies(Lowering &L, int pending);

}  // namespace tilejit::codegen
