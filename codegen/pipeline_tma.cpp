// A software pipeline's TMA copies and their mbarriers (pipeline.h, codegen/tma.h). PTX ISA 8.5: 9.7.9.25.5.1
// (cp.async.bulk.tensor), 9.7.13.15 (mbarrier: init, arrive.expect_tx, try_wait.parity, inval), 9.7.13.4
// (fence.mbarrier_init). LLVM 19 has none of the bulk-tensor or expect_tx forms: inline PTX.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/pipeline.h"
#include "codegen/software_pipeline.h"

namespace tilejit::codegen {
namespace {

llvm::Value *shared_address(Lowering &L, llvm::Value *p) { return L.b.CreatePtrToInt(p, L.b.getInt32Ty()); }

llvm::Value *is_thread0(Lowering &L) { return L.b.CreateICmpEQ(L.tid(), L.i32(0)); }
llvm::Value *is_issuer(Lowering &L) { return L.tma_issuer ? L.tma_issuer : is_thread0(L); }

/// An i32 coordinate: Σ value·multiplier + constant + `extra`.
llvm::Value *coordinate(Lowering &L, const ScalarSum &s, int64_t extra) {
  auto &b = L.b;
  llvm::Value *c = L.i32(s.constant + extra);
  for (auto [v, m] : s.terms) {
    llvm::Value *x = L.get(v).regs.at(0);
    c = b.CreateAdd(c, m == 1 ? x : b.CreateMul(x, L.i32(m)));
  }
  return c;
}

/// A launch value (a constant times integer parameters) as an i64 in the kernel.
llvm::Value *launch_value(Lowering &L, const LaunchValue &v) {
  auto &b = L.b;
  llvm::Value *x = b.getInt64(uint64_t(v.factor));
  for (int p : v.params) x = b.CreateMul(x, b.CreateSExt(L.get(L.fn.param(p)).regs.at(0), b.getInt64Ty()));
  return x;
}

/// Where a coordinate along an extent ≤ 0 goes: past any extent, so that the box reads zeros (the runtime encodes
/// such an extent as 1). Unbounded and constant extents need nothing.
llvm::Value *past_empty_extent(Lowering &L, const std::optional<LaunchValue> &extent, llvm::Value *c) {
  if (!extent || extent->params.empty()) return c;
  auto &b = L.b;
  llvm::Value *empty = b.CreateICmpSLE(launch_value(L, *extent), b.getInt64(0));
  return b.CreateSelect(empty, L.i32(0x7fff0000), c);
}

}  // namespace

void inline_ptx(Lowering &L, const std::string &text, const std::string &constraints,
                const std::vector<llvm::Value *> &args) {
  std::vector<llvm::Type *> types;
  for (llvm::Value *a : args) types.push_back(a->getType());
  auto *fty = llvm::FunctionType::get(L.b.getVoidTy(), types, false);
  L.b.CreateCall(llvm::InlineAsm::get(fty, text, constraints, /*hasSideEffects=*/true), args);
}

llvm::Value *StageRing::next(Lowering &L, llvm::Value *stage) const {
  auto &b = L.b;
  return b.CreateSelect(b.CreateICmpEQ(stage, L.i32(stages - 1)), L.i32(0), b.CreateAdd(stage, L.i32(1)));
}

llvm::Value *StageRing::previous(Lowering &L, llvm::Value *stage) const {
  auto &b = L.b;  // written as a compare with 0, which ptxas allocates best for
  return b.CreateSelect(b.CreateICmpEQ(stage, L.i32(0)), L.i32(stages - 1), b.CreateSub(stage, L.i32(1)));
}

llvm::Value *StageRing::next_phase(Lowering &L, llvm::Value *stage, llvm::Value *phase) const {
  auto &b = L.b;
  return b.CreateXor(phase, b.CreateZExt(b.CreateICmpEQ(stage, L.i32(stages - 1)), b.getInt32Ty()));
}

llvm::Value *stage_barrier(Lowering &L, llvm::Value *barriers, llvm::Value *stage) {
  return L.b.CreateInBoundsGEP(L.b.getInt64Ty(), barriers, stage);
}

void init_mbarriers(Lowering &L, llvm::Value *barriers, int count, int arrivals) {
  for (int s = 0; s < count; ++s)
    L.b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_mbarrier_init_shared),
                   {stage_barrier(L, barriers, L.i32(s)), L.i32(arrivals)});
}

void fence_mbarrier_init(Lowering &L) { inline_ptx(L, "fence.mbarrier_init.release.cluster;", "~{memory}", {}); }

llvm::Value *init_stage_barriers(Lowering &L, const LoopPipeline &p) {
  llvm::Value *bars = L.new_mbarriers(p.stages);
  L.emit_if(is_thread0(L), [&] {
    init_mbarriers(L, bars, p.stages, 1);
    fence_mbarrier_init(L);
  });
  L.barrier();
  return bars;
}

void wait_stage_barrier(Lowering &L, llvm::Value *barriers, llvm::Value *stage, llvm::Value *phase) {
  auto &b = L.b;
  llvm::Value *bar = shared_address(L, stage_barrier(L, barriers, stage));
  auto *fty = llvm::FunctionType::get(b.getInt32Ty(), {b.getInt32Ty(), b.getInt32Ty()}, false);
  auto *try_wait = llvm::InlineAsm::get(
      fty, "{\n\t.reg .pred done;\n\tmbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2;\n\tselp.u32 $0, 1, 0, done;\n\t}",
      "=r,r,r,~{memory}", /*hasSideEffects=*/true);
  // A wait that never ends is a bug (a phase no copy completes): after kMaxBarrierTries unsuccessful tries (each
  // suspends the thread for a while; seconds in all) the kernel traps, which the launch reports as an error
  // naming the kernel, rather than hang the program.
  llvm::BasicBlock *from = b.GetInsertBlock(), *spin = L.new_block("tma.wait"), *retry = L.new_block("tma.retry"),
                   *stuck = L.new_block("tma.stuck"), *done = L.new_block("tma.landed");
  b.CreateBr(spin);
  b.SetInsertPoint(spin);
  llvm::PHINode *tries = b.CreatePHI(b.getInt32Ty(), 2, "tries");
  tries->addIncoming(L.i32(0), from);
  llvm::Value *ok = b.CreateCall(try_wait, {bar, phase});
  b.CreateCondBr(b.CreateICmpNE(ok, L.i32(0)), done, retry);
  b.SetInsertPoint(retry);
  llvm::Value *next = b.CreateAdd(tries, L.i32(1));
  tries->addIncoming(next, retry);
  llvm::BranchInst *again = b.CreateCondBr(b.CreateICmpULT(next, L.i32(kMaxBarrierTries)), spin, stuck);
  // Not unrolled: a spin loop gains nothing from copies of itself.
  llvm::LLVMContext &ctx = L.ctx;
  llvm::MDNode *disable = llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  llvm::MDNode *loop_id = llvm::MDNode::getDistinct(ctx, {nullptr, disable});
  loop_id->replaceOperandWith(0, loop_id);
  again->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
  b.SetInsertPoint(stuck);
  b.CreateCall(L.intrinsic(llvm::Intrinsic::trap));
  b.CreateUnreachable();
  b.SetInsertPoint(done);
}

void retire_stage_barriers(Lowering &L, const LoopPipeline &p, llvm::Value *barriers) {
  L.barrier();
  L.emit_if(is_thread0(L), [&] {
    for (int s = 0; s < p.stages; ++s)
      L.b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_mbarrier_inval_shared), {stage_barrier(L, barriers, L.i32(s))});
  });
}

void issue_tma_copies(Lowering &L, const LoopPipeline &p, llvm::Value *stage_off, llvm::Value *valid,
                      llvm::Value *barriers, llvm::Value *stage) {
  auto &b = L.b;
  if (!barriers) L.fail("internal: a TMA copy without its pipeline's mbarriers");
  llvm::Value *bar = shared_address(L, stage_barrier(L, barriers, stage));
  L.emit_if(b.CreateAnd(is_issuer(L), valid), [&] {
    inline_ptx(L, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}",
             {bar, L.i32(p.tma_bytes())});
    for (const PipelinedLoad &ld : p.loads) {
      if (!ld.tma) continue;
      L.cur_op = ld.load;
      const TensorMapSpec &m = ld.tma->map;
      llvm::Value *map = L.tensor_map_address(ld.tensor_map);
      llvm::Value *buf = b.CreateInBoundsGEP(b.getInt8Ty(), L.smem_raw(p.base + ld.offset), stage_off);
      const int64_t panels = ld.cols / m.box_cols, boxes = ld.rows / m.box_rows;
      const int rank = int(m.dims.size());
      // The further dims' coordinates (a batch or head index) are the same for every box.
      std::vector<llvm::Value *> coords(size_t(rank), nullptr);
      for (int d = 2; d < rank; ++d) coords[size_t(d)] = coordinate(L, ld.tma->start[size_t(d)], 0);
      std::string operands;
      for (int d = 0; d < rank; ++d) operands += fmt::format("{}${}", d ? ", " : "", 2 + d);
      const std::string copy = fmt::format(
          "cp.async.bulk.tensor.{}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {{{}}}], [${}];",
          rank, operands, 2 + rank);
      std::string constraints = "r,l";
      for (int d = 0; d <= rank; ++d) constraints += ",r";
      constraints += ",~{memory}";
      for (int64_t panel = 0; panel < panels; ++panel) {
        coords[0] = past_empty_extent(L, m.dims[0].extent, coordinate(L, ld.tma->start[0], panel * m.box_cols));
        for (int64_t box = 0; box < boxes; ++box) {
          // The box's first row in the staging: wgmma's row order moves whole blocks of 8 rows (box_rows = 8).
          int64_t row_in_smem = box * m.box_rows;
          if (ld.wgmma_a_rows) {
            const int wm = ld.wgmma_a_rows->first;
            const int64_t grp = box, w = grp % wm, rep = grp / wm, mt = rep / 2, h = rep % 2;
            row_in_smem = ((w / 4) * ld.wgmma_a_rows->second + mt) * 64 + (w % 4) * 16 + h * 8;
          }
          const int64_t at = panel * ld.rows * m.box_cols * 2 + row_in_smem * m.box_cols * 2;
          llvm::Value *dst = shared_address(L, b.CreateInBoundsGEP(b.getInt8Ty(), buf, L.i32(at)));
          coords[1] = past_empty_extent(L, m.dims[1].extent, coordinate(L, ld.tma->start[1], box * m.box_rows));
          std::vector<llvm::Value *> args{dst, map};
          args.insert(args.end(), coords.begin(), coords.end());
          args.push_back(bar);
          inline_ptx(L, copy, constraints, args);
        }
      }
    }
  });
}

}  // namespace tilejit::codegen
