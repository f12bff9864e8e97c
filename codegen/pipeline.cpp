// Software pipelining with cp.async: the copies of one stage and the reads of staged loads (see pipeline.h).
#include "codegen/pipeline.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "codegen/mma.h"
#include "codegen/software_pipeline.h"
#include "tilejit/launch.h"

namespace tilejit::codegen {
namespace {

/// The blocked layout the copies are issued in: 8 consecutive elements (one 16-byte chunk) per register
/// group, lanes along the row first, warps along rows.
Layout copy_layout(int64_t rows, int64_t cols, int num_warps) {
  Layout l;
  l.shape = {rows, cols};
  l.dims = {0, 1};
  int t1 = int(std::min<int64_t>(32, cols / kChunkElems));
  l.parent.size_per_thread = {1, int(kChunkElems)};
  l.parent.threads_per_warp = {32 / t1, t1};
  l.parent.warps_per_cta = {num_warps, 1};
  l.parent.order = {1, 0};
  return l;
}

/// Whether `other` is +0.0 (or integer 0): what a zero-filled copy reads for a masked-off element.
bool is_positive_zero(const ir::Value *other) {
  return is_zero_tile(other) && !std::signbit(splatted_constant(other, true)->attrs.fvalue);
}

/// The 4-byte copies of a load staged to registers: each element by its owner thread in the default layout,
/// zero-filled where masked or where the iteration does not exist.
void issue_staged_value(Lowering &L, const PipelinedLoad &ld, int64_t base, llvm::Value *stage_off,
                        llvm::Value *valid) {
  auto &b = L.b;
  L.cur_op = ld.load;
  const ir::Value *ptr = ld.load->operand(0);
  const ir::Value *mask = ld.load->num_operands() > 1 ? ld.load->operand(1) : nullptr;
  Layout cl = default_layout(ld.load->result()->type.shape, L.opts.num_warps);
  Tile pt = L.get_in(ptr, cl);
  Tile mt = mask ? L.get_in(mask, cl) : Tile{};
  llvm::Value *buf = b.CreateInBoundsGEP(b.getInt8Ty(), L.smem_raw(base + ld.offset), stage_off);
  llvm::Function *copy = L.intrinsic(llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s);
  llvm::Value *owner = L.owner_pred(cl);
  const std::vector<int64_t> strides = row_major_strides(cl.shape);
  L.emit_if(owner, [&] {
    for (int64_t r = 0; r < cl.num_regs(); ++r) {
      if (cl.reg_is_duplicate(r)) continue;
      llvm::Value *dst = b.CreateInBoundsGEP(b.getInt32Ty(), buf, L.linear_index(cl, r, strides));
      llvm::Value *ok = mask ? b.CreateAnd(valid, mt.regs[size_t(r)]) : valid;
      b.CreateCall(copy, {dst, pt.regs[size_t(r)], b.CreateSelect(ok, L.i32(4), L.i32(0))});
    }
  });
}

}  // namespace

Tile read_staged_load(Lowering &L, const ir::Op &load) {
  auto &b = L.b;
  const ir::Value *res = load.result();
  const ir::Value *mask = load.num_operands() > 1 ? load.operand(1) : nullptr;
  const ir::Value *other = load.num_operands() > 2 ? load.operand(2) : nullptr;
  auto it = L.smem_operands.find(res);
  if (it == L.smem_operands.end()) L.fail("internal: a staged load read outside its pipelined loop");
  const Layout &l = L.layout_of(res);
  llvm::Type *mt = L.mem_type(res->type.elem);
  Tile m = mask && other && !is_positive_zero(other) ? L.get_in(mask, l) : Tile{};
  Tile o = m.regs.empty() ? Tile{} : L.get_in(other, l);
  Tile out{l, std::vector<llvm::Value *>(size_t(l.num_regs()), nullptr)};
  const std::vector<int64_t> strides = row_major_strides(l.shape);
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    llvm::Value *at = b.CreateInBoundsGEP(mt, it->second, L.linear_index(l, r, strides));
    llvm::Value *x = L.from_mem(b.CreateAlignedLoad(mt, at, llvm::Align(4)), res->type.elem);
    // Masked-off elements were zero-filled: only an `other` other than +0 needs selecting.
    out.regs[size_t(r)] = m.regs.empty() ? x : b.CreateSelect(m.regs[size_t(r)], x, o.regs[size_t(r)]);
  }
  return out;
}

void issue_stage(Lowering &L, const ir::Op &for_op, const LoopPipeline &p, llvm::Value *iv, llvm::Value *valid,
                 llvm::Value *stage, llvm::Value *barriers) {
  auto &b = L.b;
  const ir::Block &body = *for_op.region(0);
  const ir::Op *saved = L.cur_op;
  L.bind(body.arg(0), Tile{std::nullopt, {iv}});
  // A gathered index tile (a paged cache's page numbers) and what is computed from it are not lowered here:
  // the copies' addresses rematerialize them in the copy layout, the load re-issued there under the stage's
  // validity, which costs a second L1-hit gather instead of a conversion through shared memory (two barriers)
  // per load. Only where every such op can be rematerialized.
  std::unordered_set<const ir::Op *> deferred;
  for (const ir::Op *op : p.slice) {
    bool from_gather = is_index_load(*op) && !op->result()->type.is_scalar();
    for (const ir::Value *o : op->operands) from_gather = from_gather || (o->def && deferred.count(o->def));
    if (from_gather) deferred.insert(op);
  }
  auto rematerializable = [](const ir::Op *op) { return is_index_load(*op) || can_rematerialize(op->kind); };
  if (!std::all_of(deferred.begin(), deferred.end(), rematerializable)) deferred.clear();
  for (const ir::Op *op : deferred)
    if (is_index_load(*op)) L.guarded_loads[op->result()] = {valid, {}};
  // TMA copies alone need only the scalars of their coordinates: no tile of the slice is computed (nor converted
  // through shared memory, which a producer warp could not synchronize for).
  const bool scalars_only = !p.uses_cp_async();
  auto skipped = [&](const ir::Op *op) {
    return deferred.count(op) || (scalars_only && !(op->num_results() == 1 && op->result()->type.is_scalar()));
  };
  for (const ir::Op *op : p.slice) {
    L.cur_op = op;
    if (skipped(op)) continue;
    if (!is_index_load(*op)) {
      L.lower_op(*op);
      continue;
    }
    // Only read when the iteration exists (a later iteration's index may lie past the end of its list);
    // otherwise 0: the copies of an invalid iteration are zero-filled and read nothing anyway.
    llvm::BasicBlock *from = b.GetInsertBlock(), *then = L.new_block("pipe.load"), *done = L.new_block("pipe.loaded");
    b.CreateCondBr(valid, then, done);
    b.SetInsertPoint(then);
    L.lower_op(*op);
    Tile loaded = L.get(op->result());
    llvm::BasicBlock *then_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(done);
    for (llvm::Value *&v : loaded.regs) {
      llvm::PHINode *phi = b.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, then_end);
      phi->addIncoming(llvm::Constant::getNullValue(v->getType()), from);
      v = phi;
    }
    L.bind(op->result(), loaded);
  }
  // The copies' addresses and masks are computed in the copy layout from the slice: its re-lowerable values
  // count as rematerializable while the stage is issued, so a pointer tile built from a gathered index tile
  // (page numbers) is recomputed in the copy layout from the small index tile instead of converted itself (a
  // [BLOCK_N, d] tile of 64-bit pointers through shared memory, per load and stage).
  for (const ir::Op *op : p.slice)
    if (!is_index_load(*op) || deferred.count(op))
      for (int i = 0; i < op->num_results(); ++i)
        if (!op->result(i)->type.is_scalar()) L.remat_while_issuing.insert(op->result(i));
  llvm::Function *copy = L.intrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s);
  llvm::Value *stage_off = b.CreateMul(stage, L.i32(p.stage_bytes));
  for (const PipelinedLoad &ld : p.loads) {
    if (ld.to_registers) issue_staged_value(L, ld, p.base, stage_off, valid);
  }
  if (p.tma_bytes()) issue_tma_copies(L, p, stage_off, valid, barriers, stage);
  for (const PipelinedLoad &ld : p.loads) {
    if (ld.to_registers || ld.tma) continue;
    L.cur_op = ld.load;
    const ir::Value *ptr = ld.load->operand(0);
    const ir::Value *mask = ld.load->num_operands() > 1 ? ld.load->operand(1) : nullptr;
    Layout cl = copy_layout(ld.rows, ld.cols, L.opts.num_warps);
    Tile pt = L.get_in(ptr, cl);
    Tile mt = mask ? L.get_in(mask, cl) : Tile{};
    llvm::Value *buf = b.CreateInBoundsGEP(b.getInt8Ty(), L.smem_raw(p.base + ld.offset), stage_off);
    for (int64_t r = 0; r < cl.num_regs(); ++r) {
      if (cl.reg_index(r)[1] % kChunkElems || cl.reg_is_duplicate(r)) continue;
      llvm::Value *row = L.coord(cl, 0, r), *col = L.coord(cl, 1, r);
      if (ld.wgmma_a_rows) row = wgmma_a_row(L, row, ld.wgmma_a_rows->first, ld.wgmma_a_rows->second);
      llvm::Value *off = swizzled_chunk(L, row, b.CreateLShr(col, 3), ld.cols, ld.rows);
      llvm::Value *dst = b.CreateInBoundsGEP(b.getInt16Ty(), buf, off);
      llvm::Value *ok = mask ? b.CreateAnd(valid, mt.regs[size_t(r)]) : valid;
      llvm::Value *bytes = b.CreateSelect(ok, L.i32(16), L.i32(0));
      b.CreateCall(copy, {dst, pt.regs[size_t(r)], bytes});
    }
  }
  if (p.uses_cp_async()) b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group));
  L.remat_while_issuing.clear();
  L.guarded_loads.clear();
  for (const ir::Op *op : p.slice)
    if (!skipped(op))
      for (int i = 0; i < op->num_results(); ++i) L.forget(op->result(i));
  L.forget(body.arg(0));
  L.cur_op = saved;
}

void bind_stage(Lowering &L, const LoopPipeline &p, llvm::Value *stage) {
  auto &b = L.b;
  llvm::Value *stage_off = b.CreateMul(stage, L.i32(p.stage_bytes));
  for (const PipelinedLoad &ld : p.loads) {
    L.smem_operands[ld.load->result()] = b.CreateInBoundsGEP(b.getInt8Ty(), L.smem_raw(p.base + ld.offset), stage_off);
    if (ld.wgmma_a_rows) L.wgmma_stage_a.insert(ld.load->result());
  }
}

void wait_copies(Lowering &L, int pending) {
  L.b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group), {L.i32(pending)});
}

}  // namespace tilejit::codegen
