// The codegen pipeline: plan layouts and axis info, lower the tile IR to one LLVM kernel, verify, optimize,
// emit PTX. Also the core of the Lowering state (values, conversions, thread geometry, shared memory).
#include "codegen/codegen.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Metadata.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/assign_layouts.h"
#include "codegen/emit_ptx.h"
#include "codegen/layout_text.h"
#include "codegen/lowering.h"
#include "codegen/mma.h"
#include "codegen/pipeline.h"
#include "codegen/place_waits.h"
#include "codegen/warp_specialize.h"
#include "codegen/wgmma.h"
#include "ir/passes.h"
#include "tilejit/error.h"

namespace tilejit::codegen {

void check_num_warps(const ir::Function &fn, int num_warps) {
  if (num_warps < 1 || num_warps > 32 || !is_pow2(num_warps))
    throw CompileError(fmt::format("codegen: num_warps must be a power of two in [1, 32], got {} (kernel '{}')",
                                   num_warps, fn.name));
}

// ------------------------------------------------------------------------------------------------ state --

Lowering::Lowering(const ir::Function &fn, const CodegenOptions &opts, llvm::LLVMContext &ctx,
                   llvm::Module &mod)
    : fn(fn), opts(opts), ctx(ctx), mod(mod), b(ctx) {
  check_num_warps(fn, opts.num_warps);
  use_wgmma = kernel_uses_wgmma(fn, opts);
  entry_.clear();
  for (char c : fn.name) entry_ += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (entry_.empty() || std::isdigit(static_cast<unsigned char>(entry_[0]))) entry_ = "k_" + entry_;
}

int sm_version(const std::string &arch) {
  int v = 0;
  for (char c : arch)
    if (c >= '0' && c <= '9') v = v * 10 + (c - '0');
  return v;
}

bool waits_for_prior_grid(const std::string &arch) { return sm_version(arch) >= 90; }

void Lowering::fail(const std::string &why) const {
  if (!cur_op) throw CompileError(fmt::format("codegen: kernel '{}': {}", fn.name, why));
  throw CompileError(fmt::format("codegen: cannot lower op '{}' at {} in kernel '{}': {}", ir::op_name(cur_op->kind),
                                 cur_op->loc.str(), fn.name, why));
}

void Lowering::check_registers_per_thread() {
  // A tile whose layout gives each thread thousands of registers compiles for minutes (ptxas spills it; a
  // 1024x1024 f32 dot on 4 warps took 229 s) into a kernel nobody wants: an error naming the op says so at once.
  ir::walk(const_cast<ir::Block &>(*fn.body), [&](ir::Op &op) {
    for (int i = 0; i < op.num_results(); ++i) {
      const ir::Value *v = op.result(i);
      if (v->type.is_scalar() || !plan.has(v)) continue;
      const int64_t words = (dtype_bytes(v->type.dtype()) + 3) / 4, regs = plan.of(v).num_regs() * words;
      if (regs <= kMaxRegistersPerValue) continue;
      cur_op = &op;
      fail(fmt::format("its {} result would take {} registers per thread with {} warps (at most {}, 8 times the 255 "
                       "a thread has: ptxas would spend minutes spilling it); use smaller blocks or more warps",
                       v->type.str(), regs, opts.num_warps, kMaxRegistersPerValue));
    }
  });
  cur_op = nullptr;
}

llvm::Function *Lowering::intrinsic(unsigned id, llvm::ArrayRef<llvm::Type *> tys) {
  return llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::ID(id), tys);
}

llvm::BasicBlock *Lowering::new_block(const char *name) { return llvm::BasicBlock::Create(ctx, name, kernel); }

llvm::Type *Lowering::reg_type(ElemType t) {
  if (t.is_ptr) return llvm::PointerType::get(ctx, 1);
  switch (t.dtype) {
    case DType::i1: return b.getInt1Ty();
    case DType::i8: return b.getInt8Ty();
    case DType::i16: return b.getInt16Ty();
    case DType::i32: return b.getInt32Ty();
    case DType::i64: return b.getInt64Ty();
    case DType::f16: return b.getHalfTy();
    case DType::bf16: return b.getBFloatTy();
    case DType::f32: return b.getFloatTy();
    case DType::f64: return b.getDoubleTy();
  }
  return nullptr;
}

llvm::Type *Lowering::mem_type(ElemType t) {
  if (t.is_ptr) return b.getInt64Ty();
  if (t.dtype == DType::i1) return b.getInt8Ty();
  return reg_type(t);
}

llvm::Type *Lowering::compute_type(DType t) {
  if (t == DType::f16 || t == DType::bf16) return b.getFloatTy();
  return reg_type(ElemType{t, false});
}

llvm::Value *Lowering::to_mem(llvm::Value *v, ElemType t) {
  if (t.is_ptr) return b.CreatePtrToInt(v, b.getInt64Ty());
  if (t.dtype == DType::i1) return b.CreateZExt(v, b.getInt8Ty());
  return v;
}

llvm::Value *Lowering::from_mem(llvm::Value *v, ElemType t) {
  if (t.is_ptr) return b.CreateIntToPtr(v, reg_type(t));
  if (t.dtype == DType::i1) return b.CreateICmpNE(v, b.getInt8(0));
  return v;
}

// ----------------------------------------------------------------------------------------------- values --

const Tile &Lowering::get(const ir::Value *v) {
  auto it = values_.find(v);
  if (it == values_.end()) fail(fmt::format("an operand of type {} is used before it is defined", v->type.str()));
  for (const PendingDot &pd : pending_wgmma_)
    if (pd.v == v) {
      wait_wgmma_through(pd.group);
      break;
    }
  return it->second;
}

Lowering::StagedSnapshot Lowering::staged_snapshot() const {
  StagedSnapshot s;
  for (auto &[v, g] : persistent_operands) s.persistent.insert(v);
  for (auto &[v, f] : mma_a_fragments) s.fragments.insert(v);
  return s;
}

void Lowering::forget_staged_since(const StagedSnapshot &before) {
  std::erase_if(persistent_operands, [&](const auto &e) { return !before.persistent.count(e.first); });
  std::erase_if(mma_a_fragments, [&](const auto &e) { return !before.fragments.count(e.first); });
}

// ------------------------------------------------------------------------------ deferred wgmma waits --

void Lowering::defer_wgmma(const ir::Value *result, int instr_n) {
  pending_wgmma_.push_back({result, wgmma_groups - 1, instr_n});
}

void Lowering::wait_wgmma_through(int group, const char *why) {
  // wait_group takes 0..7: with more newer groups, waiting for some of them too is still correct.
  const int pending = std::min(wgmma_groups - 1 - group, 7);
  if (notes) note(fmt::format("{} (wgmma.wait_group {})", why ? why : "first waits for a running wgmma dot", pending));
  wgmma_wait(*this, pending);
  std::vector<PendingDot> still;
  for (const PendingDot &pd : pending_wgmma_) {
    if (pd.group > group) {
      still.push_back(pd);
      continue;
    }
    pin_registers(*this, values_.at(pd.v).regs);  // no use of the registers may move above the wait
  }
  pending_wgmma_ = std::move(still);
}

std::optional<Tile> Lowering::take_pending(const ir::Value *v, int instr_n, bool *from_last_iteration) {
  for (size_t i = 0; i < pending_wgmma_.size(); ++i)
    if (pending_wgmma_[i].v == v && (pending_wgmma_[i].instr_n == instr_n || pending_wgmma_[i].from_last_iteration)) {
      if (from_last_iteration) *from_last_iteration = pending_wgmma_[i].from_last_iteration;
      pending_wgmma_.erase(pending_wgmma_.begin() + std::ptrdiff_t(i));
      return values_.at(v);
    }
  return std::nullopt;
}

void Lowering::carry_running(const ir::Value *arg) {
  pending_wgmma_.push_back({arg, wgmma_groups - 1, /*instr_n=*/0, /*from_last_iteration=*/true});
}

Tile Lowering::leave_running(const ir::Value *v) {
  if (pending_wgmma_.empty() || pending_wgmma_.back().v != v || pending_wgmma_.back().group != wgmma_groups - 1)
    fail("internal: the dot the plan leaves running is not the iteration's newest running wgmma group");
  if (notes)
    note("the iteration ends with wgmma.wait_group 1: the previous iteration's wgmmas have completed, this one's "
         "run on into the next");
  wgmma_wait(*this, 1);
  pending_wgmma_.pop_back();
  for (const PendingDot &pd : pending_wgmma_) pin_registers(*this, values_.at(pd.v).regs);
  pending_wgmma_.clear();
  return values_.at(v);
}

int Lowering::use_count(const ir::Value *v) {
  if (use_counts_.empty()) use_counts_ = ir::use_counts(*fn.body);
  auto it = use_counts_.find(v);
  return it == use_counts_.end() ? 0 : it->second;
}

void Lowering::wait_all_wgmma(const char *why) {
  if (!pending_wgmma_.empty()) wait_wgmma_through(pending_wgmma_.back().group, why);
}

void Lowering::wait_wgmma_for_regions(const ir::Op &op) {
  if (pending_wgmma_.empty()) return;
  std::unordered_set<const ir::Value *> read;
  bool has_dot = false;
  for (int i = 0; i < op.num_operands(); ++i) read.insert(op.operand(i));
  for (auto &region : op.regions)
    ir::walk(*region, [&](ir::Op &inner) {
      has_dot = has_dot || inner.kind == ir::OpKind::Dot;
      for (int i = 0; i < inner.num_operands(); ++i) read.insert(inner.operand(i));
    });
  const char *why = "waits first for the running wgmma dots its regions read";
  if (has_dot) return wait_all_wgmma(why);
  int newest = -1;
  for (const PendingDot &pd : pending_wgmma_)
    if (read.count(pd.v)) newest = std::max(newest, pd.group);
  if (newest >= 0) wait_wgmma_through(newest, why);
}

void Lowering::set(const ir::Value *v, Tile t) {
  if (!v->type.is_scalar() && !t.is_scalar() && plan.has(v)) {
    const Layout &want = plan.of(v);
    if (!(*t.layout == want)) t = convert(t, v->type.elem, want);
  }
  values_[v] = std::move(t);
}

Tile Lowering::get_in(const ir::Value *v, const Layout &l) {
  // Not lowered where it is defined (a pipeline stage's deferred gather, pipeline.cpp): computed here in l.
  if (!values_.count(v) && is_remat(v)) return rematerialize(v, l, 0);
  const Tile &t = get(v);
  if (t.is_scalar()) return splat_tile(l, t.regs[0]);
  if (*t.layout == l) return t;
  if (t.layout->shape != l.shape)
    fail(fmt::format("internal: operand of shape {} needed in shape {}", ir::shape_str(t.layout->shape),
                     ir::shape_str(l.shape)));
  if (same_distribution(*t.layout, l)) return Tile{l, t.regs};
  if (is_remat(v)) return rematerialize(v, l, 0);
  return convert(t, v->type.elem, l);
}

Tile Lowering::rematerialize(const ir::Value *v, const Layout &l, int depth) {
  const ir::Op *def = v->def;
  const ir::Op *saved = cur_op;
  cur_op = def;
  Tile t;
  using K = ir::OpKind;
  // The families of can_rematerialize (software_pipeline.h), then a pipeline stage's gathered index loads.
  if (def->kind == K::Constant || def->kind == K::Arange) t = lower_source(*this, *def, &l);
  else if (def->kind == K::Splat || def->kind == K::ExpandDims || def->kind == K::Broadcast)
    t = lower_shape_op(*this, *def, &l);
  else if (ir::is_elementwise(def->kind)) t = lower_elementwise(*this, *def, &l);
  else if (auto g = guarded_loads.find(v); g != guarded_loads.end()) {
    auto &loaded = g->second.loaded;
    auto same = [&](const auto &e) { return e.first == l; };
    if (auto it = std::find_if(loaded.begin(), loaded.end(), same); it != loaded.end()) {
      t = it->second;
    } else {
      t = lower_load(*this, *def, &l, g->second.guard);
      loaded.emplace_back(l, t);
    }
  }
  else t = convert(get(v), v->type.elem, l);
  cur_op = saved;
  return t;
}

Tile Lowering::convert(const Tile &t, ElemType et, const Layout &to) {
  if (t.is_scalar()) return splat_tile(to, t.regs[0]);
  if (same_distribution(*t.layout, to)) return Tile{to, t.regs};
  if (notes) note("converts a value's layout through shared memory (two barriers)");
  const std::vector<int64_t> strides = row_major_strides(to.shape);
  return redistribute(t, et, to, strides, strides);
}

// ------------------------------------------------------------------------------------- thread geometry --

llvm::Value *Lowering::thread_base(const Layout &l, int i) {
  int k = l.dims[i];
  const auto &p = l.parent;
  int t = p.threads_per_warp[k], w = p.warps_per_cta[k], s = p.size_per_thread[k];
  llvm::Value *v = i32(0);
  if (w > 1) v = b.CreateAnd(b.CreateLShr(warp_, l.warp_shift(k)), w - 1);
  if (t > 1) {
    llvm::Value *lane_k = b.CreateAnd(b.CreateLShr(lane_, l.lane_shift(k)), t - 1);
    v = b.CreateOr(b.CreateShl(v, log2_exact(t)), lane_k);
  }
  v = b.CreateShl(v, log2_exact(s));
  return b.CreateAnd(v, i32(l.shape[i] - 1));
}

llvm::Value *Lowering::coord(const Layout &l, int i, int64_t r) {
  int64_t off = l.reg_offset(i, l.reg_index(r)[i]) & (l.shape[i] - 1);
  return b.CreateOr(thread_base(l, i), i32(off));
}

llvm::Value *Lowering::linear_index(const Layout &l, int64_t r, const std::vector<int64_t> &strides) {
  auto idx = l.reg_index(r);
  llvm::Value *sum = i32(0);
  int64_t c = 0;
  for (int i = 0; i < l.rank(); ++i) {
    if (l.shape[i] == 1) continue;
    c += (l.reg_offset(i, idx[i]) & (l.shape[i] - 1)) * strides[i];
    sum = b.CreateAdd(sum, b.CreateMul(thread_base(l, i), i32(strides[i])));
  }
  return b.CreateAdd(sum, i32(c));
}

llvm::Value *Lowering::owner_pred(const Layout &l) {
  unsigned lm = l.lane_replication_mask(), wm = l.warp_replication_mask();
  llvm::Value *p = b.getTrue();
  if (lm) p = b.CreateICmpEQ(b.CreateAnd(lane_, lm), i32(0));
  if (wm) p = b.CreateAnd(p, b.CreateICmpEQ(b.CreateAnd(warp_, wm), i32(0)));
  return p;
}

// ----------------------------------------------------------------------------------------- shared memory --

void Lowering::reserve_smem(int64_t bytes) { reserve_smem_total(scratch_offset + bytes); }

void Lowering::reserve_smem_total(int64_t bytes) {
  smem_bytes_ = std::max(smem_bytes_, (bytes + 15) / 16 * 16);
  if (!smem_) {
    auto *ty = llvm::ArrayType::get(b.getInt8Ty(), 0);
    smem_ = new llvm::GlobalVariable(mod, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr, "tilejit_smem",
                                     nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    smem_->setAlignment(llvm::Align(16));
  }
}

llvm::Value *Lowering::smem_addr(llvm::Value *index, llvm::Type *ty, int64_t base_bytes) {
  return b.CreateInBoundsGEP(ty, smem_raw(scratch_offset + base_bytes), index);
}

llvm::Value *Lowering::smem_raw(int64_t base_bytes) {
  if (!smem_) reserve_smem_total(0);
  llvm::Value *p = smem_base_ ? smem_base_ : smem_;
  if (base_bytes) p = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), p, uint64_t(base_bytes));
  return p;
}

llvm::Value *Lowering::tensor_map_address(int i) {
  if (i < 0 || size_t(i) >= plan.tensor_maps.size()) fail("internal: no such tensor map");
  return b.CreatePtrToInt(kernel->getArg(unsigned(fn.params.size() + size_t(i))), b.getInt64Ty());
}

llvm::Value *Lowering::new_mbarriers(int count) {
  static_smem_bytes_ += 8 * count;
  auto *ty = llvm::ArrayType::get(b.getInt64Ty(), uint64_t(count));
  auto *g = new llvm::GlobalVariable(mod, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                     "tilejit_mbarriers", nullptr, llvm::GlobalValue::NotThreadLocal, 3);
  g->setAlignment(llvm::Align(8));
  return g;
}

llvm::GlobalVariable *Lowering::new_static_smem(int64_t bytes, int64_t align) {
  const int64_t cost = static_staging_cost(bytes, align);
  bytes = (bytes + 15) / 16 * 16;
  if (static_smem_bytes_ + cost > kStaticStagingBytes) return nullptr;
  static_smem_bytes_ += cost;
  auto *ty = llvm::ArrayType::get(b.getInt8Ty(), uint64_t(bytes));
  auto *g = new llvm::GlobalVariable(mod, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                     "tilejit_staged", nullptr, llvm::GlobalValue::NotThreadLocal, 3);
  g->setAlignment(llvm::Align(uint64_t(align)));
  return g;
}

llvm::Value *Lowering::place_dynamic_staging(int64_t offset, int64_t bytes, int64_t align) {
  // stage_operands follows the emission order: a drift either way is a bug of one of them.
  if (offset != align_up(scratch_offset, align))
    fail(fmt::format("internal: the plan stages an operand at byte {} of the dynamic buffer, where the scratch in use "
                     "ends at byte {}", offset, scratch_offset));
  scratch_offset = persistent_end_ = offset + (bytes + 15) / 16 * 16;
  reserve_smem_total(scratch_offset);
  return smem_raw(offset);
}

void Lowering::barrier() {
  if (tma_issuer) fail("internal: the producer warpgroup's thread would wait at the consumers' barrier");
  if (use_wgmma) fence_proxy_async(*this);  // shared-memory writes before the barrier may be read by wgmma after it
  // With a producer warpgroup, which never waits here, the consumers synchronize among themselves (barrier 0
  // counting their threads).
  if (plan.producer_warps())
    b.CreateCall(intrinsic(llvm::Intrinsic::nvvm_barrier_sync_cnt), {i32(0), i32(32 * opts.num_warps)});
  else
    b.CreateCall(intrinsic(llvm::Intrinsic::nvvm_barrier0));
}

Tile Lowering::redistribute(const Tile &src, ElemType et, const Layout &dst, const std::vector<int64_t> &src_strides,
                            const std::vector<int64_t> &dst_strides, bool owners_only) {
  const Layout &sl = *src.layout;
  llvm::Type *mt = mem_type(et);
  int64_t bytes = int64_t(mod.getDataLayout().getTypeAllocSize(mt));
  int64_t numel = 1;
  for (auto d : sl.shape) numel *= d;
  reserve_smem(numel * bytes);
  llvm::Align align{uint64_t(bytes)};
  barrier();  // earlier readers of the buffer are done
  emit_if(owners_only ? owner_pred(sl) : b.getTrue(), [&] {
    for (int64_t r = 0; r < sl.num_regs(); ++r) {
      if (sl.reg_is_duplicate(r)) continue;
      b.CreateAlignedStore(to_mem(src.regs[size_t(r)], et), smem_addr(linear_index(sl, r, src_strides), mt), align);
    }
  });
  barrier();
  Tile out{dst, {}};
  out.regs.reserve(size_t(dst.num_regs()));
  for (int64_t r = 0; r < dst.num_regs(); ++r)
    out.regs.push_back(from_mem(b.CreateAlignedLoad(mt, smem_addr(linear_index(dst, r, dst_strides), mt), align), et));
  return out;
}

// --------------------------------------------------------------------------------------------- lowering --

void Lowering::declare_kernel() {
  std::vector<llvm::Type *> params;
  for (const auto &p : fn.params) {
    if (!p.type.is_scalar())
      throw CompileError(fmt::format("codegen: parameter '{}' of kernel '{}' has tile type {}; parameters must be "
                                     "scalars or pointers", p.name, fn.name, p.type.str()));
    params.push_back(reg_type(p.type.elem));
  }
  // The tensor maps of TMA copies (codegen/tma.h): 128-byte structs passed by value, 64-byte aligned.
  auto *map_type = llvm::ArrayType::get(b.getInt8Ty(), 128);
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) params.push_back(llvm::PointerType::get(ctx, 0));
  auto *fty = llvm::FunctionType::get(b.getVoidTy(), params, false);
  kernel = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, entry_, mod);
  kernel->setCallingConv(llvm::CallingConv::PTX_Kernel);
  for (size_t i = 0; i < fn.params.size(); ++i) {
    kernel->getArg(unsigned(i))->setName(fn.params[i].name);
    if (fn.params[i].type.is_ptr() && fn.params[i].align16)
      kernel->addParamAttr(unsigned(i), llvm::Attribute::getWithAlignment(ctx, llvm::Align(16)));
  }
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    const unsigned at = unsigned(fn.params.size() + i);
    kernel->getArg(at)->setName(fmt::format("tensor_map{}", i));
    kernel->addParamAttr(at, llvm::Attribute::getWithByValType(ctx, map_type));
    kernel->addParamAttr(at, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
  }
  auto *md = mod.getOrInsertNamedMetadata("nvvm.annotations");
  if (!plan.tensor_maps.empty()) {
    // Read in place through a generic address of the parameter (cvta.param), not copied to local memory: the
    // copies' tensor map must lie in the param, const or global space (PTX ISA 9.7.9.25.5.1).
    std::vector<llvm::Metadata *> indices;
    for (size_t i = 0; i < plan.tensor_maps.size(); ++i)
      indices.push_back(llvm::ValueAsMetadata::get(b.getInt32(uint32_t(fn.params.size() + i + 1))));  // 1-based
    llvm::Metadata *ops[] = {llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx, "grid_constant"),
                             llvm::MDNode::get(ctx, indices)};
    md->addOperand(llvm::MDNode::get(ctx, ops));
  }
  auto annotate = [&](const char *key, int value) {
    llvm::Metadata *ops[] = {llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx, key),
                             llvm::ValueAsMetadata::get(b.getInt32(uint32_t(value)))};
    md->addOperand(llvm::MDNode::get(ctx, ops));
  };
  annotate("kernel", 1);
  annotate("maxntidx", num_threads());
  // setmaxnreg takes effect only under a register cap at the kernel's entry (.maxntid with .minnctapersm).
  const int min_ctas = plan.producer_warps() ? std::max(1, opts.min_ctas_per_sm) : opts.min_ctas_per_sm;
  if (min_ctas > 0) annotate("minctasm", min_ctas);
}

void Lowering::run() {
  // Tensor-core dots lower to mma.sync m16n8k16 (PTX ISA: sm_80+ for bf16; LLVM cannot select it below), so
  // older targets get an error naming the dot instead of an LLVM abort.
  if (sm_version(opts.arch) < 80)
    ir::walk(const_cast<ir::Block &>(*fn.body), [&](ir::Op &op) {
      if (!dot_uses_mma(op, opts.num_warps)) return;
      cur_op = &op;
      fail(fmt::format("an f16/bf16 dot needs tensor cores of sm_80 or newer (mma.sync m16n8k16); {} is older",
                       opts.arch));
    });
  if (given_plan) {
    if (given_plan->passes < int(plan_passes().size()))
      fail(fmt::format("the given lowering plan is up to {}; the lowering follows a plan after all its passes ({})",
                       plan_passes()[size_t(given_plan->passes - 1)], fmt::join(plan_passes(), ", ")));
    const CodegenOptions &o = given_plan->opts;
    if (o.arch != opts.arch || o.num_warps != opts.num_warps || o.num_stages != opts.num_stages || o.wgmma != opts.wgmma)
      fail(fmt::format("the given lowering plan was made for {}, {} warps, {} stages{}; this compilation is for {}, "
                       "{} warps, {} stages{}", o.arch, o.num_warps, o.num_stages, o.wgmma ? "" : " without wgmma",
                       opts.arch, opts.num_warps, opts.num_stages, opts.wgmma ? "" : " without wgmma"));
  }
  axis = analyze_axis_info(fn);
  plan = given_plan ? *given_plan : plan_lowering(fn, opts, &axis);
  if (!allow_dynamic_staging) {  // the same operands, or fewer, placed again without the dynamic buffer
    const std::unordered_set<const ir::Value *> staged = staged_operands(plan);
    stage_operands(fn, plan, /*dynamic=*/false, &staged);
    const std::unordered_set<const ir::Value *> running = running_dots(plan);  // the same, or fewer
    place_waits(fn, plan, &running);
  }
  check_registers_per_thread();
  declare_kernel();
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", kernel));
  tid_ = b.CreateCall(intrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), {}, "tid");
  lane_ = b.CreateAnd(tid_, 31, "lane");
  warp_ = b.CreateLShr(tid_, 5, "warp");
  if (waits_for_prior_grid(opts.arch)) {  // codegen.h: before any memory access
    auto *fty = llvm::FunctionType::get(b.getVoidTy(), false);
    for (const char *text : {"griddepcontrol.launch_dependents;", "griddepcontrol.wait;"})
      b.CreateCall(llvm::InlineAsm::get(fty, text, "~{memory}", /*hasSideEffects=*/true), {});
  }
  if (use_wgmma) {  // the buffer starts at the next multiple of 1024 bytes (shared_bytes() adds the slack)
    reserve_smem_total(0);
    llvm::Value *addr = b.CreatePtrToInt(smem_, b.getInt32Ty());
    llvm::Value *pad = b.CreateAnd(b.CreateSub(i32(0), addr), i32(1023));
    smem_base_ = b.CreateInBoundsGEP(b.getInt8Ty(), smem_, pad, "smem_aligned");
  }
  for (size_t i = 0; i < fn.params.size(); ++i) bind(fn.param(int(i)), Tile{std::nullopt, {kernel->getArg(unsigned(i))}});
  if (!plan.specialized.empty()) begin_warp_specialization(*this);
  lower_block(*fn.body);
  cur_op = fn.body->ops.empty() ? nullptr : fn.body->ops.back().get();  // the note goes on the last op
  wait_all_wgmma("the kernel ends waiting for a wgmma dot whose result is never read");
  cur_op = nullptr;
  b.CreateRetVoid();
}

void Lowering::lower_block(const ir::Block &blk) {
  for (auto &op : blk.ops) {
    cur_op = op.get();
    lower_op(*op);
  }
}

void Lowering::lower_op(const ir::Op &op) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Constant: case K::ProgramId: case K::NumPrograms: case K::Arange:
      set(op.result(), lower_source(*this, op));
      return;
    case K::Splat: case K::Broadcast: case K::ExpandDims: case K::Trans: case K::Reshape:
      if (plan.folded.count(op.result())) return;  // read by tensor-core dots from its operand
      set(op.result(), lower_shape_op(*this, op));
      return;
    case K::Load:
      if (const PipelinedLoad *ld = plan.pipelined(&op)) {
        if (ld->to_registers) set(op.result(), read_staged_load(*this, op));
        return;  // else copied to shared memory by the loop's pipeline, read there by the dots
      }
      set(op.result(), lower_load(*this, op));
      return;
    case K::Store:
      lower_store(*this, op);
      return;
    case K::AtomicAdd:
      set(op.result(), lower_atomic_add(*this, op));
      return;
    case K::Reduce: case K::ArgReduce:
      set(op.result(), lower_reduce(*this, op));
      return;
    case K::Dot:
      dot_left_pending = false;
      set(op.result(), lower_dot(*this, op));
      if (dot_left_pending) defer_wgmma(op.result(), dot_pending_n);
      return;
    case K::For:
      wait_wgmma_for_regions(op);
      lower_for(*this, op);
      return;
    case K::If:
      wait_wgmma_for_regions(op);
      lower_if(*this, op);
      return;
    case K::Yield:
      return;  // read by the enclosing For/If
    default:
      if (ir::is_elementwise(op.kind)) {
        set(op.result(), lower_elementwise(*this, op));
        return;
      }
      fail("this op is not supported by the GPU code generator");
  }
}

// -------------------------------------------------------------------------------------------------- API --

namespace {

using Notes = std::unordered_map<const ir::Op *, std::vector<std::string>>;

struct Lowered {
  std::unique_ptr<llvm::LLVMContext> ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> mod;
  std::string entry;
  int64_t shared_bytes = 0, static_shared_bytes = 0;
  bool dynamic_persistent = false;  // some loop-invariant operand went to the dynamic buffer
  LoweringPlan plan;                // the plan it followed
};

// The shared memory one block may use on `arch`, static and dynamic together (the opt-in maximum; CUDA C
// Programming Guide, compute capabilities table).
int64_t max_shared_per_block(const std::string &arch) {
  const int sm = sm_version(arch);
  if (sm == 90) return 227 * 1024;
  if (sm == 80 || sm == 87) return 163 * 1024;
  if (sm == 86 || sm == 89) return 99 * 1024;
  if (sm == 70 || sm == 72) return 96 * 1024;
  if (sm == 75) return 64 * 1024;
  return 48 * 1024;  // any other: the limit every arch has
}

std::string module_text(const llvm::Module &mod) {
  std::string s;
  llvm::raw_string_ostream os(s);
  mod.print(os, nullptr);
  os.flush();
  return s;
}

Lowered lower(const ir::Function &fn, const CodegenOptions &opts, const LoweringPlan *plan, Notes *notes = nullptr) {
  auto attempt = [&](bool dynamic_persistent) {
    Lowered out;
    out.mod = std::make_unique<llvm::Module>(fn.name, *out.ctx);
    prepare_module(*out.mod, target_machine(opts.arch));
    Lowering l(fn, opts, *out.ctx, *out.mod);
    l.allow_dynamic_staging = dynamic_persistent;
    l.given_plan = plan;
    if (notes) notes->clear();
    l.notes = notes;
    l.run();
    out.entry = l.entry_name();
    out.shared_bytes = l.shared_bytes();
    out.static_shared_bytes = l.static_shared_bytes();
    out.dynamic_persistent = l.persistent_end() > 0;
    out.plan = std::move(l.plan);  // the lowering is done with it
    verify_or_throw(*out.mod, fn.name);
    return out;
  };
  Lowered out = attempt(true);
  // Loop-invariant operands in the dynamic buffer push the loops' stage buffers and scratch up; where that
  // no longer fits a block, they stay in registers (restaged each iteration) as before — unless a text stated
  // them, which is then refused rather than changed.
  const int64_t needed = out.shared_bytes + out.static_shared_bytes, most = max_shared_per_block(opts.arch);
  if (out.dynamic_persistent && needed > most) {
    if (plan && plan->stated_staging)
      throw CompileError(fmt::format(
          "codegen: {}: the plan's loop-invariant operands staged in the dynamic buffer leave the kernel {} bytes of "
          "shared memory with its scratch, more than a block has on {} ({}); take the 'shared' mark off some of "
          "them (the stage_operands stage shows what fits)", fn.name, needed, opts.arch, most));
    out.mod.reset();  // before its context, which the move below destroys first
    out = attempt(false);
  }
  return out;
}

}  // namespace

TILEJIT_EXPORT PtxResult compile_to_ptx(const ir::Function &fn, const CodegenOptions &opts, const LoweringPlan *plan) {
  Lowered m = lower(fn, opts, plan);
  PtxResult r;
  r.ptx = optimize_and_emit_ptx(*m.mod, opts.arch);
  r.entry = m.entry;
  r.shared_bytes = int(m.shared_bytes);
  r.num_threads = 32 * (opts.num_warps + m.plan.producer_warps());
  for (const TensorMapSpec &s : m.plan.tensor_maps) r.tensor_maps.push_back(tensor_map_text(s));
  return r;
}

TILEJIT_EXPORT std::string emit_llvm_ir(const ir::Function &fn, const CodegenOptions &opts, const LoweringPlan *plan) {
  return module_text(*lower(fn, opts, plan).mod);
}

TILEJIT_EXPORT std::string print_lowering(const ir::Function &fn, const CodegenOptions &opts, std::string *llvm_ir,
                                          const LoweringPlan *plan, LoweringPlan *followed) {
  Notes notes;
  Lowered m = lower(fn, opts, plan, &notes);
  if (llvm_ir) *llvm_ir = module_text(*m.mod);
  std::string text = print_layouts(fn, opts, [&](const ir::Op *op) {
    auto it = notes.find(op);
    return it == notes.end() ? std::string() : fmt::format("{}", fmt::join(it->second, "; "));
  }, &m.plan);
  if (followed) *followed = std::move(m.plan);
  return text;
}

TILEJIT_EXPORT LoweringPlan followed_plan(const ir::Function &fn, const CodegenOptions &opts, const LoweringPlan *plan) {
  return lower(fn, opts, plan).plan;
}

TILEJIT_EXPORT std::string llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace tilejit::codegen
