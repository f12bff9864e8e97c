// Stage operands (codegen/stage_operands.h): a walk of the function in the order the lowering emits it, keeping
// what the lowering will have in shared memory at each point.
#include "codegen/stage_operands.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "codegen/mma.h"
#include "codegen/software_pipeline.h"

namespace tilejit::codegen {
namespace {

/// Registers per thread that preloaded A fragments may take (4 per m16 × k16 tile).
constexpr int64_t kMaxPreloadedRegs = 16;

/// True when v is computed inside `body` (an op of it or of a region nested in it, or one of their arguments).
bool defined_inside(const ir::Value *v, const ir::Block &body) {
  const ir::Block *blk = v->def ? v->def->parent : v->block;
  for (; blk; blk = blk->parent ? blk->parent->parent : nullptr)
    if (blk == &body) return true;
  return false;
}

class Stager {
 public:
  Stager(LoweringPlan &plan, bool use_wgmma, bool dynamic, const std::unordered_set<const ir::Value *> *only)
      : plan_(plan), use_wgmma_(use_wgmma), dynamic_(dynamic), only_(only) {}

  void block(const ir::Block &blk) {
    for (const auto &op : blk.ops) {
      if (op->kind == ir::OpKind::For) {
        loop(*op);
      } else {
        for (const auto &r : op->regions) scoped(*r);
      }
    }
  }

 private:
  // An if region, or a loop body, may not run: what it stages is staged again by a later loop.
  void scoped(const ir::Block &blk) {
    const auto staged = staged_;
    const auto fragments = fragments_;
    block(blk);
    staged_ = staged;
    fragments_ = fragments;
  }

  void loop(const ir::Op &for_op) {
    const ir::Block &body = *for_op.region(0);
    const int64_t saved = scratch_;
    auto pipe = plan_.pipelines.find(&for_op);
    if (pipe != plan_.pipelines.end()) {
      pipe->second.base = align_up(scratch_, stage_buffer_align(use_wgmma_));
      scratch_ = pipe->second.end();  // the prologue's copies are in flight while the operands are staged
    }
    LoopStaging staging;
    std::vector<const ir::Op *> mma_dots;
    ir::walk(const_cast<ir::Block &>(body), [&](ir::Op &dot) {
      if (dot.kind != ir::OpKind::Dot) return;
      const bool mma = dot_uses_mma(dot, plan_.opts.num_warps);
      if (mma) mma_dots.push_back(&dot);
      for (int i = 0; i < 2; ++i)
        if (auto s = candidate(dot, i, mma, body); s && place(*s)) {
          staged_[s->operand] = s->form;
          staging.operands.push_back(*s);
        } else if (s && s->operand == explain_ && why_.empty()) {
          why_ = fmt::format("it does not fit in shared memory ({} bytes past {} of static arrays, or in the dynamic "
                             "buffer up to byte {})", s->bytes, kStaticStagingBytes, kDynamicStagingBytes);
        }
    });
    for (const ir::Op *dot : mma_dots)
      if (preloads(*dot)) {
        fragments_.insert(dot->operand(0));
        staging.preload.push_back(dot);
      }
    if (!staging.operands.empty() || !staging.preload.empty()) plan_.staging[&for_op] = std::move(staging);
    if (!staged_.empty()) plan_.in_shared[&for_op] = staged_;
    scoped(body);
    if (pipe != plan_.pipelines.end()) scratch_ = std::max(saved, persistent_end_);
  }

  /// Operand i of `dot` (in the loop whose body is `body`) as a staged operand, if it qualifies.
  std::optional<StagedOperand> candidate(const ir::Op &dot, int i, bool mma, const ir::Block &body) {
    const ir::Value *v = dot.operand(i);
    // A text marks only op results: a loop-carried tile (a region argument) is decided as the pass decides.
    if (staged_.count(v) || (only_ && v->def && !only_->count(v)) || v->type.rank() != 2) return std::nullopt;
    auto refuse = [&](const char *why) -> std::optional<StagedOperand> {
      if (v == explain_ && why_.empty()) why_ = why;
      return std::nullopt;
    };
    StagedOperand s;
    s.operand = v;
    s.index = i;
    s.source = mma && i == 1 && plan_.folded.count(v) ? v->def->operand(0) : v;
    if (defined_inside(s.source, body)) return std::nullopt;  // not loop-invariant here; maybe in an inner loop
    if (plan_.folded.count(s.source)) return refuse("a folded transpose is staged only as a tensor-core dot's b");
    if (!computed(s.source)) return refuse("it is a load another loop's pipeline copies into its stage buffers");
    if (!mma) {
      if (dot.attrs.flag && v->type.dtype() == DType::f32)  // tf32: rounded at the dot
        return refuse("it is an f32 operand of a tf32 dot, rounded at the dot");
      s.form = StagedOperand::Form::RowMajor;
      s.bytes = v->type.numel() * dtype_bytes(v->type.dtype());
      return s;
    }
    const int num_warps = plan_.opts.num_warps;
    // An A already in MMA registers is used in place, except with wgmma (codegen/lower_dot_mma.cpp).
    if (i == 0 && a_in_mma_registers(plan_.of(s.source), num_warps) && !use_wgmma_)
      return refuse("it is an A already in the MMA layout, which mma.sync reads from registers");
    s.bytes = s.source->type.numel() * 2;
    if (i == 0 && (s.wgmma_rows = wgmma_a_order(dot, use_wgmma_, num_warps, plan_.folded))) {
      s.form = StagedOperand::Form::WgmmaA;
      s.align = 1024;
    } else if (i == 1 && dot_runs_on_wgmma(dot, use_wgmma_, num_warps, plan_.folded)) {
      s.form = StagedOperand::Form::WgmmaB;
      s.align = 1024;
    }
    return s;
  }

  /// In registers when the loop is reached: not a folded transpose, not a load copied by a pipeline.
  bool computed(const ir::Value *v) const {
    if (plan_.folded.count(v)) return false;
    const PipelinedLoad *ld = v->def ? plan_.pipelined(v->def) : nullptr;
    return !ld || ld->to_registers;
  }

  /// Places s in a static array, or in the dynamic buffer past the scratch in use; false when neither fits.
  bool place(StagedOperand &s) {
    const int64_t bytes = align_up(s.bytes, 16), cost = static_staging_cost(s.bytes, s.align);
    if (static_bytes_ + cost <= kStaticStagingBytes) {
      static_bytes_ += cost;
      return true;
    }
    // The dynamic buffer's start is 1024-byte aligned only in wgmma kernels.
    if (!dynamic_ || (s.align > 16 && !use_wgmma_)) return false;
    const int64_t at = align_up(scratch_, s.align);
    if (at + bytes > kDynamicStagingBytes) return false;
    s.dynamic = true;
    s.offset = at;
    scratch_ = persistent_end_ = at + bytes;
    return true;
  }

  /// Whether the staged A of tensor-core `dot` is loaded into registers once, before the loop. Not with wgmma:
  /// ptxas (CUDA 13.0, driver 580) was seen to give loop-invariant A fragments of a wgmma the same physical
  /// registers as the next dot's A fragments (flex attention's p, in a loop with an `if`), so the second
  /// iteration multiplied by p instead of q (SASS: both HGMMAs read R88..R103).
  bool preloads(const ir::Op &dot) const {
    const ir::Value *a = dot.operand(0);
    auto staged = staged_.find(a);
    if (use_wgmma_ || staged == staged_.end() || staged->second == StagedOperand::Form::RowMajor || fragments_.count(a))
      return false;
    const auto l = mma_layout(dot.result()->type.shape, plan_.opts.num_warps);
    const int64_t mt = l->shape[0] / (16 * l->parent.warps_per_cta[0]), kt = a->type.shape[1] / 16;
    return mt * kt * 4 <= kMaxPreloadedRegs;
  }

 public:
  /// Why `explain_` (set before the walk) was not staged: the first refusal of a loop's dot that reads it, empty
  /// when none did (no dot in a loop it is computed before reads it).
  const ir::Value *explain_ = nullptr;
  std::string why_;

 private:
  LoweringPlan &plan_;
  const bool use_wgmma_, dynamic_;
  const std::unordered_set<const ir::Value *> *only_;
  std::unordered_map<const ir::Value *, StagedOperand::Form> staged_;  // in shared memory now, and how
  std::unordered_set<const ir::Value *> fragments_;                     // A fragments in registers now
  int64_t scratch_ = 0;          // where scratch starts in the dynamic buffer
  int64_t persistent_end_ = 0;   // the end of the dynamic staged operands
  int64_t static_bytes_ = 0;     // static arrays so far, padding counted
};

}  // namespace

void stage_operands(const ir::Function &fn, LoweringPlan &plan, bool dynamic,
                    const std::unordered_set<const ir::Value *> *only) {
  plan.staging.clear();
  plan.in_shared.clear();
  Stager(plan, kernel_uses_wgmma(fn, plan.opts), dynamic, only).block(*fn.body);
}

std::string why_not_staged(const ir::Function &fn, const LoweringPlan &plan, const ir::Value *v) {
  LoweringPlan copy = plan;
  const std::unordered_set<const ir::Value *> only{v};
  Stager stager(copy, kernel_uses_wgmma(fn, plan.opts), true, &only);
  stager.explain_ = v;
  stager.block(*fn.body);
  if (!stager.why_.empty()) return stager.why_;
  if (v->type.rank() != 2) return "only a rank-2 tile is a dot operand";
  return "no dot in a loop it is computed before reads it";
}

std::unordered_set<const ir::Value *> staged_operands(const LoweringPlan &plan) {
  std::unordered_set<const ir::Value *> out;
  for (const auto &[loop, staging] : plan.staging)
    for (const StagedOperand &s : staging.operands) out.insert(s.operand);
  return out;
}

}  // namespace tilejit::codegen
