// Software pipelining with cp.async: which loads qualify, and the copies of one stage (see pipeline.h).
#include "codegen/pipeline.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "codegen/mma.h"
#include "tilejit/launch.h"

namespace tilejit::codegen {
namespace {

constexpr int64_t kChunkElems = 8;                  // 16 bytes of 16-bit elements per cp.async

/// Ops that may be re-lowered for another iteration: pure, no regions, no memory.
bool relowerable(ir::OpKind k) {
  using K = ir::OpKind;
  return k == K::Constant || k == K::Arange || k == K::Splat || k == K::Broadcast || k == K::ExpandDims ||
         k == K::Reshape || k == K::Trans || ir::is_elementwise(k);
}

/// An unmasked load of integer indices — a block-sparse loop's next key-block index, `load(list + i)`, or a
/// paged cache's page numbers, `load(block_table + cols / page_size)`: it may be re-lowered for a later
/// iteration too, guarded by that iteration's validity (issue_stage).
bool is_index_load(const ir::Op &op) {
  if (op.kind != ir::OpKind::Load || op.num_operands() != 1 || op.result()->type.elem.is_ptr) return false;
  DType dt = op.result()->type.dtype();
  return dt == DType::i32 || dt == DType::i64;
}

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

/// The kernel parameter a pointer tile is computed from (through pointer arithmetic and shape ops), or null.
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

/// The pointer roots that stores and atomics anywhere in `body` write through (null among them when one cannot
/// be traced to a parameter).
std::unordered_set<const ir::Value *> written_pointer_roots(const ir::Function &fn, const ir::Block &body) {
  std::unordered_set<const ir::Value *> roots;
  ir::walk(const_cast<ir::Block &>(body), [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Store || op.kind == ir::OpKind::AtomicAdd) roots.insert(pointer_root(fn, op.operand(0)));
  });
  return roots;
}

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

std::optional<LoopPipeline> plan_pipeline(Lowering &L, const ir::Op &for_op) {
  if (L.opts.num_stages < 2 || sm_version(L.opts.arch) < 80) return std::nullopt;
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
           dot_uses_mma(*user, L.opts.num_warps);
  };

  LoopPipeline p;
  p.stages = L.opts.num_stages;
  const int64_t align = L.use_wgmma ? 1024 : 128;  // wgmma descriptors need 1024-byte aligned swizzle atoms
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
      return L.is_lowered(v);
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
      if (user->kind == ir::OpKind::Trans && L.plan.folded.count(user->result())) {
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
      auto it = L.axis.find(v);
      return it == L.axis.end() ? AxisInfo{} : it->second;
    };
    if (ai(ptr).contig < kChunkElems || ai(ptr).div < 16) continue;
    if (mask && ai(mask).constancy < kChunkElems) continue;
    if (other && !is_zero_tile(other)) continue;
    if (!collect(ptr) || (mask && !collect(mask))) continue;
    PipelinedLoad pl{&op, rows, cols, p.stage_bytes, std::nullopt};
    // A of wgmma dots only (all in the same row order): the wgmma reads it from the stage buffer.
    const auto order = wgmma_a_order(L, *us.front().first);
    if (order && std::all_of(us.begin(), us.end(), [&](const auto &u) {
          return u.second == 0 && wgmma_a_order(L, *u.first) == order;
        }))
      pl.wgmma_a_rows = order;
    p.stage_bytes += (rows * cols * 2 + align - 1) / align * align;
    p.loads.push_back(pl);
  }
  if (p.loads.empty()) return std::nullopt;
  auto stages_within_budget = [&](int64_t stage_bytes) {
    int s = p.stages;
    while (s >= 2 && s * stage_bytes > kMaxPipelineBytes) --s;
    return s;
  };
  // Small loads read by other ops ride in the same stages (pipeline.h), if staging them cannot read a value
  // older than the plain load would and does not cost the pipeline a stage.
  const std::unordered_set<const ir::Value *> written = written_pointer_roots(L.fn, body);
  auto sliced = [&](const ir::Op *op) {
    auto it = in_slice.find(op);
    return it != in_slice.end() && it->second;
  };
  const auto before_values = std::make_pair(slice_ops, in_slice);
  std::vector<PipelinedLoad> staged_values;
  for (const auto &op_ptr : body.ops) {
    const ir::Op &op = *op_ptr;
    if (op.kind != ir::OpKind::Load || sliced(&op)) continue;
    const ir::Type &t = op.result()->type;
    if (t.is_scalar() || t.elem.is_ptr || t.numel() > kMaxStagedValueElems) continue;
    if (t.dtype() != DType::f32 && t.dtype() != DType::i32) continue;
    const ir::Value *ptr = op.operand(0), *root = pointer_root(L.fn, ptr);
    if (!root || written.count(root) || written.count(nullptr) || !depends_on(ptr, body.arg(0), body)) continue;
    const ir::Value *mask = op.num_operands() > 1 ? op.operand(1) : nullptr;
    if (!collect(ptr) || (mask && !collect(mask))) continue;
    staged_values.push_back(PipelinedLoad{&op, t.numel(), 1, 0, std::nullopt, /*to_registers=*/true});
  }
  // A candidate that another's address turned out to depend on is re-lowered by the slice instead.
  std::erase_if(staged_values, [&](const PipelinedLoad &v) { return sliced(v.load); });
  int64_t with_values = p.stage_bytes;
  for (PipelinedLoad &v : staged_values) {
    v.offset = with_values;
    with_values += (v.rows * 4 + 15) / 16 * 16;
  }
  with_values = (with_values + align - 1) / align * align;
  if (!staged_values.empty() && stages_within_budget(with_values) == stages_within_budget(p.stage_bytes)) {
    p.stage_bytes = with_values;
    p.loads.insert(p.loads.end(), staged_values.begin(), staged_values.end());
  } else {
    std::tie(slice_ops, in_slice) = before_values;  // nothing staged: the slice is the dot operands' alone
  }
  p.stages = stages_within_budget(p.stage_bytes);
  if (p.stages < 2) return std::nullopt;
  p.base = (L.scratch_offset + align - 1) / align * align;
  // The slice in body order (collect appended operands before users, but across loads order may differ).
  for (const auto &op_ptr : body.ops)
    if (auto it = in_slice.find(op_ptr.get()); it != in_slice.end() && it->second &&
        std::find(slice_ops.begin(), slice_ops.end(), op_ptr.get()) != slice_ops.end())
      p.slice.push_back(op_ptr.get());
  return p;
}

void issue_stage(Lowering &L, const ir::Op &for_op, const LoopPipeline &p, llvm::Value *iv, llvm::Value *valid,
                 llvm::Value *stage) {
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
  auto rematerializable = [](const ir::Op *op) {
    return is_index_load(*op) ||
           (relowerable(op->kind) && op->kind != ir::OpKind::Reshape && op->kind != ir::OpKind::Trans);
  };
  if (!std::all_of(deferred.begin(), deferred.end(), rematerializable)) deferred.clear();
  for (const ir::Op *op : deferred)
    if (is_index_load(*op)) L.guarded_loads[op->result()] = {valid, {}};
  for (const ir::Op *op : p.slice) {
    L.cur_op = op;
    if (deferred.count(op)) continue;
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
  std::vector<const ir::Value *> made_remat;
  for (const ir::Op *op : p.slice)
    if (!is_index_load(*op) || deferred.count(op))
      for (int i = 0; i < op->num_results(); ++i)
        if (!op->result(i)->type.is_scalar() && L.plan.rematerializable.insert(op->result(i)).second)
          made_remat.push_back(op->result(i));
  llvm::Function *copy = L.intrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s);
  llvm::Value *stage_off = b.CreateMul(stage, L.i32(p.stage_bytes));
  for (const PipelinedLoad &ld : p.loads) {
    if (ld.to_registers) issue_staged_value(L, ld, p.base, stage_off, valid);
  }
  for (const PipelinedLoad &ld : p.loads) {
    if (ld.to_registers) continue;
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
  b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group));
  for (const ir::Value *v : made_remat) L.plan.rematerializable.erase(v);
  L.guarded_loads.clear();
  for (const ir::Op *op : p.slice)
    if (!deferred.count(op))
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
