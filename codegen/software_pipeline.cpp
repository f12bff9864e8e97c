// Software pipeline planning (codegen/software_pipeline.h).
#include "codegen/software_pipeline.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

#include "codegen/mma.h"
#include "codegen/tma.h"
#include "tilejit/launch.h"

namespace tilejit::codegen {

bool relowerable(ir::OpKind k) {
  using K = ir::OpKind;
  return k == K::Constant || k == K::Arange || k == K::Splat || k == K::Broadcast || k == K::ExpandDims ||
         k == K::Reshape || k == K::Trans || ir::is_elementwise(k);
}

bool can_rematerialize(ir::OpKind k) { return relowerable(k) && k != ir::OpKind::Reshape && k != ir::OpKind::Trans; }

bool is_index_load(const ir::Op &op) {
  if (op.kind != ir::OpKind::Load || op.num_operands() != 1 || op.result()->type.elem.is_ptr) return false;
  DType dt = op.result()->type.dtype();
  return dt == DType::i32 || dt == DType::i64;
}

const ir::Op *splatted_constant(const ir::Value *v, bool through_casts) {
  using K = ir::OpKind;
  for (int depth = 0; v && v->def && depth < 8; ++depth) {
    const ir::Op *d = v->def;
    if (d->kind == K::Constant) return d;
    if (d->kind != K::Splat && d->kind != K::Broadcast && d->kind != K::ExpandDims && d->kind != K::Reshape &&
        !(through_casts && d->kind == K::Cast))
      return nullptr;
    v = d->operand(0);
  }
  return nullptr;
}

bool is_zero_tile(const ir::Value *v) {
  const ir::Op *c = splatted_constant(v, true);
  return c && c->attrs.fvalue == 0.0 && c->attrs.ivalue == 0;
}

const ir::Value *pointer_root(const ir::Function &fn, const ir::Value *p) {
  using K = ir::OpKind;
  for (int depth = 0; p && depth < 64; ++depth) {
    if (!p->def) return p->block == fn.body.get() ? p : nullptr;
    const K k = p->def->kind;
    if (k != K::PtrAdd && k != K::Splat && k != K::Broadcast && k != K::ExpandDims && k != K::Reshape && k != K::Trans)
      return nullptr;
    p = p->def->operand(0);
  }
  return nullptr;
}

std::unordered_set<const ir::Value *> written_pointer_roots(const ir::Function &fn, const ir::Block &body) {
  std::unordered_set<const ir::Value *> roots;
  ir::walk(const_cast<ir::Block &>(body), [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Store || op.kind == ir::OpKind::AtomicAdd) roots.insert(pointer_root(fn, op.operand(0)));
  });
  return roots;
}

namespace {

/// Whether v is computed (within `body`) from `arg`.
bool depends_on(const ir::Value *v, const ir::Value *arg, const ir::Block &body) {
  std::unordered_set<const ir::Value *> seen;
  std::vector<const ir::Value *> todo{v};
  while (!todo.empty()) {
    const ir::Value *x = todo.back();
    todo.pop_back();
    if (x == arg) return true;
    if (!x->def || x->def->parent != &body || !seen.insert(x).second) continue;
    todo.insert(todo.end(), x->def->operands.begin(), x->def->operands.end());
  }
  return false;
}

struct Context {
  const ir::Function &fn;
  const CodegenOptions &opts;
  const LoweringPlan &plan;
  const AxisInfoMap &axis;
  bool use_wgmma;
  const PipelineMarks *only;
  /// Dot-operand loads of enclosing loops' pipelines: never lowered to registers.
  std::unordered_set<const ir::Op *> copied;
  bool allows(const ir::Op &load, bool staged) const {
    if (!only) return true;
    auto it = only->find(&load);
    return it != only->end() && it->second == staged;
  }
};

std::optional<LoopPipeline> plan_loop(const Context &C, const ir::Op &for_op) {
  const ir::Block &body = *for_op.region(0);
  std::unordered_map<const ir::Value *, std::vector<std::pair<const ir::Op *, int>>> uses;
  bool acquires = false;
  ir::walk(const_cast<ir::Block &>(body), [&](ir::Op &op) {
    for (int i = 0; i < op.num_operands(); ++i) uses[op.operand(i)].push_back({&op, i});
    acquires |= op.kind == ir::OpKind::AtomicAdd && op.attrs.flag;
  });
  // The copies of later iterations are issued before this iteration's ops: an acquire-release atomic in the
  // body (ops.h MemOrder::AcqRel) must precede the loads that follow it, so such a loop is not pipelined.
  if (acquires) return std::nullopt;
  auto is_body_dot_operand = [&](const ir::Op *user, int i) {
    return user->kind == ir::OpKind::Dot && user->parent == &body && (i == 0 || i == 1) &&
           dot_uses_mma(*user, C.opts.num_warps);
  };

  LoopPipeline p;
  p.stages = C.opts.num_stages;
  const int64_t align = stage_buffer_align(C.use_wgmma);
  std::vector<const ir::Op *> slice_ops;
  std::unordered_map<const ir::Op *, bool> in_slice;
  // Collects the body ops `v` depends on; false when v depends on anything but the induction variable,
  // values from outside the loop and re-lowerable body ops.
  std::function<bool(const ir::Value *)> collect = [&](const ir::Value *v) -> bool {
    if (!v->def) return v->block != &body || v->index == 0;
    const ir::Op *d = v->def;
    if (d->parent != &body) {
      for (const ir::Block *blk = d->parent; blk; blk = blk->parent ? blk->parent->parent : nullptr)
        if (blk == &body) return false;  // inside a nested region of the body
      // From outside the loop: in registers by the time the loop runs, unless it is a folded transpose or an
      // enclosing pipeline's copied load (both read only by dots, so an address never reaches one in practice).
      return !C.plan.folded.count(v) && !(v->def->kind == ir::OpKind::Load && C.copied.count(v->def));
    }
    if (auto it = in_slice.find(d); it != in_slice.end()) return it->second;
    if (!relowerable(d->kind) && !is_index_load(*d)) return in_slice[d] = false;
    in_slice[d] = true;
    for (const ir::Value *o : d->operands)
      if (!collect(o)) return in_slice[d] = false;
    slice_ops.push_back(d);
    return true;
  };

  for (const auto &op_ptr : body.ops) {
    const ir::Op &op = *op_ptr;
    if (op.kind != ir::OpKind::Load) continue;
    if (!C.allows(op, false)) continue;
    const ir::Value *res = op.result();
    if (res->type.rank() != 2 || res->type.elem.is_ptr) continue;
    if (res->type.dtype() != DType::bf16 && res->type.dtype() != DType::f16) continue;
    int64_t rows = res->type.shape[0], cols = res->type.shape[1];
    if (cols < kChunkElems || !is_pow2(cols) || !is_pow2(rows)) continue;
    // Only tensor-core dot operands (the dot reads the swizzled staging).
    auto &us = uses[res];
    bool ok = !us.empty();
    for (auto [user, i] : us) {
      if (is_body_dot_operand(user, i)) continue;
      if (user->kind == ir::OpKind::Trans && C.plan.folded.count(user->result())) {
        for (auto [u2, j] : uses[user->result()]) ok = ok && j == 1 && is_body_dot_operand(u2, j);
        continue;
      }
      ok = false;
    }
    if (!ok) continue;
    // 16-byte chunks: contiguous, aligned, uniformly masked, zero where masked.
    const ir::Value *ptr = op.operand(0);
    const ir::Value *mask = op.num_operands() > 1 ? op.operand(1) : nullptr;
    const ir::Value *other = op.num_operands() > 2 ? op.operand(2) : nullptr;
    auto ai = [&](const ir::Value *v) {
      auto it = C.axis.find(v);
      return it == C.axis.end() ? AxisInfo{} : it->second;
    };
    if (ai(ptr).contig < kChunkElems || ai(ptr).div < 16) continue;
    if (mask && ai(mask).constancy < kChunkElems) continue;
    if (other && !is_zero_tile(other)) continue;
    if (!collect(ptr) || (mask && !collect(mask))) continue;
    PipelinedLoad pl;
    pl.load = &op, pl.rows = rows, pl.cols = cols, pl.offset = p.stage_bytes;
    // A of wgmma dots only (all in the same row order): the wgmma reads it from the stage buffer.
    const auto order = wgmma_a_order(*us.front().first, C.use_wgmma, C.opts.num_warps, C.plan.folded);
    if (order && std::all_of(us.begin(), us.end(), [&](const auto &u) {
          return u.second == 0 && wgmma_a_order(*u.first, C.use_wgmma, C.opts.num_warps, C.plan.folded) == order;
        }))
      pl.wgmma_a_rows = order;
    // TMA copies the tile when it is an affine block of a 2-D tensor (codegen/tma.h): boxes of one 64-column panel
    // (the staging's swizzle span), of 8 rows where wgmma's row order permutes A's rows in blocks of 8.
    if (C.opts.tma && C.use_wgmma) {
      if (std::optional<TmaTile> t = tma_tile(C.fn, op, for_op)) {
        t->map.box_cols = std::min<int64_t>(cols, 64);
        t->map.swizzle_bytes = t->map.box_cols * 2 >= 32 ? int(t->map.box_cols * 2) : 0;
        t->map.box_rows = pl.wgmma_a_rows ? 8 : std::min<int64_t>(rows, 256);
        pl.tma = std::move(t);
      }
    }
    p.stage_bytes += align_up(rows * cols * 2, align);
    p.loads.push_back(pl);
  }
  if (p.loads.empty()) return std::nullopt;
  auto stages_within_budget = [&](int64_t stage_bytes) {
    int s = p.stages;
    while (s >= 2 && s * stage_bytes > kMaxPipelineBytes) --s;
    return s;
  };
  // Small loads read by other ops ride in the same stages (software_pipeline.h), if staging them cannot read a value
  // older than the plain load would and does not cost the pipeline a stage.
  const std::unordered_set<const ir::Value *> written = written_pointer_roots(C.fn, body);
  auto sliced = [&](const ir::Op *op) {
    auto it = in_slice.find(op);
    return it != in_slice.end() && it->second;
  };
  const auto before_values = std::make_pair(slice_ops, in_slice);
  std::vector<PipelinedLoad> staged_values;
  for (const auto &op_ptr : body.ops) {
    const ir::Op &op = *op_ptr;
    if (op.kind != ir::OpKind::Load || sliced(&op)) continue;
    if (!C.allows(op, true)) continue;
    const ir::Type &t = op.result()->type;
    if (t.is_scalar() || t.elem.is_ptr || t.numel() > kMaxStagedValueElems) continue;
    if (t.dtype() != DType::f32 && t.dtype() != DType::i32) continue;
    const ir::Value *ptr = op.operand(0), *root = pointer_root(C.fn, ptr);
    if (!root || written.count(root) || written.count(nullptr) || !depends_on(ptr, body.arg(0), body)) continue;
    const ir::Value *mask = op.num_operands() > 1 ? op.operand(1) : nullptr;
    if (!collect(ptr) || (mask && !collect(mask))) continue;
    PipelinedLoad pl;
    pl.load = &op, pl.rows = t.numel(), pl.cols = 1, pl.to_registers = true;
    staged_values.push_back(pl);
  }
  // A candidate that another's address turned out to depend on is re-lowered by the slice instead.
  std::erase_if(staged_values, [&](const PipelinedLoad &v) { return sliced(v.load); });
  int64_t with_values = p.stage_bytes;
  for (PipelinedLoad &v : staged_values) {
    v.offset = with_values;
    with_values += align_up(v.rows * 4, 16);
  }
  with_values = align_up(with_values, align);
  if (!staged_values.empty() && stages_within_budget(with_values) == stages_within_budget(p.stage_bytes)) {
    p.stage_bytes = with_values;
    p.loads.insert(p.loads.end(), staged_values.begin(), staged_values.end());
  } else {
    std::tie(slice_ops, in_slice) = before_values;  // nothing staged: the slice is the dot operands' alone
  }
  p.stages = stages_within_budget(p.stage_bytes);
  if (p.stages < 2) return std::nullopt;
  // The slice in body order (collect appended operands before users, but across loads order may differ).
  for (const auto &op_ptr : body.ops)
    if (auto it = in_slice.find(op_ptr.get()); it != in_slice.end() && it->second &&
        std::find(slice_ops.begin(), slice_ops.end(), op_ptr.get()) != slice_ops.end())
      p.slice.push_back(op_ptr.get());
  return p;
}

}  // namespace

void plan_pipelines(const ir::Function &fn, const CodegenOptions &opts, const AxisInfoMap &axis, LoweringPlan &plan,
                    const PipelineMarks *only) {
  if (opts.num_stages < 2 || sm_version(opts.arch) < 80) return;
  Context C{fn, opts, plan, axis, kernel_uses_wgmma(fn, opts), only, {}};
  // Outer loops first: what an enclosing pipeline copies is not in registers for the loops inside it.
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind != ir::OpKind::For) return;
    std::optional<LoopPipeline> p = plan_loop(C, op);
    if (!p) return;
    for (const PipelinedLoad &ld : p->loads)
      if (!ld.to_registers) C.copied.insert(ld.load);
    plan.pipelines.emplace(&op, std::move(*p));
  });
  drop_unmarked_tma(fn, plan, [](const ir::Op *) { return true; });
}

void drop_unmarked_tma(const ir::Function &fn, LoweringPlan &plan, const std::function<bool(const ir::Op *)> &keep_tma) {
  // Maps numbered in the order of the function's loads (the pipelines' hash order would change the PTX).
  plan.tensor_maps.clear();
  ir::walk(const_cast<ir::Block &>(*fn.body), [&](ir::Op &op) {
    if (op.kind != ir::OpKind::Load) return;
    auto *ld = const_cast<PipelinedLoad *>(plan.pipelined(&op));
    if (!ld || !ld->tma) return;
    if (!keep_tma(ld->load)) {
      ld->tma.reset();
      ld->tensor_map = -1;
      return;
    }
    auto same = std::find(plan.tensor_maps.begin(), plan.tensor_maps.end(), ld->tma->map);
    ld->tensor_map = int(same - plan.tensor_maps.begin());
    if (same == plan.tensor_maps.end()) plan.tensor_maps.push_back(ld->tma->map);
  });
}

}  // namespace tilejit::codegen
