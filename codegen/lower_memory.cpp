// Global memory: Load, Store, AtomicAdd, one register (or one vector of consecutive registers) at a time.
// Masked accesses branch around the access; a masked-off load yields `other` (0 by default).
// Vectorization: when the thread holds v ≥ 2 consecutive elements along the last dim and the axis info
// proves the pointers contiguous and aligned for v elements (and the mask uniform over them), one access of
// v elements (≤ 16 bytes) is emitted. Stores and atomics are performed by the owner thread of each element
// only (replicated copies would duplicate atomics).
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>

#include "codegen/lowering.h"

namespace tilejit::codegen {
namespace {

AxisInfo info(Lowering &L, const ir::Value *v) {
  auto it = L.axis.find(v);
  return it == L.axis.end() ? AxisInfo{} : it->second;
}

/// Elements per vector access along the last dim (1 = scalar accesses).
int64_t vector_width(Lowering &L, const Layout &l, const ir::Value *ptr, const ir::Value *mask, int64_t esize) {
  if (l.rank() == 0) return 1;
  int last = l.rank() - 1;
  AxisInfo p = info(L, ptr);
  int64_t v = std::min<int64_t>({l.parent.size_per_thread[size_t(l.dims[size_t(last)])], p.contig,
                                 p.div / esize, 16 / esize, l.shape[size_t(last)]});
  if (mask) v = std::min(v, info(L, mask).constancy);
  int64_t pow2 = 1;
  while (pow2 * 2 <= v) pow2 *= 2;
  return std::max<int64_t>(1, pow2);
}

/// The register holding the same element as r with the smallest index (r itself unless duplicated).
int64_t canonical_reg(const Layout &l, int64_t r) {
  auto idx = l.reg_index(r);
  for (int i = 0; i < l.rank(); ++i) {
    int64_t s = l.parent.size_per_thread[size_t(l.dims[size_t(i)])];
    int64_t j = idx[size_t(i)] % s;
    idx[size_t(i)] = idx[size_t(i)] - j + (j & (l.shape[size_t(i)] - 1));
  }
  return l.reg_from_index(idx);
}

/// The type a vector of v elements of mt is moved as: 32-bit words when it spans ≥ 4 bytes (so the backend
/// emits one ld/st.v{1,2,4}.b32 rather than splitting vectors of 16-bit types), else mt itself.
llvm::Type *access_type(Lowering &L, llvm::Type *mt, int64_t esize, int64_t v) {
  int64_t bytes = esize * v;
  if (v == 1) return mt;
  if (bytes == 4) return L.b.getInt32Ty();
  if (bytes % 4 == 0) return llvm::FixedVectorType::get(L.b.getInt32Ty(), unsigned(bytes / 4));
  return llvm::FixedVectorType::get(mt, unsigned(v));
}

/// A vector of 16-bit (or 8-bit) elements loaded as `words` 32-bit words by inline PTX, predicated on cond:
/// LLVM 19 folds a <2 x i32> load feeding a bitcast back into a <4 x bf16> load, which NVPTX then splits
/// into two loads. Where cond is false the words are unspecified (the caller selects `other` there).
llvm::Value *asm_load_words(Lowering &L, llvm::Value *p, int64_t words, llvm::Value *cond) {
  auto &b = L.b;
  std::string outs, cons;
  for (int64_t i = 0; i < words; ++i) {
    outs += (i ? ", $" : "$") + std::to_string(i);
    cons += "=r,";
  }
  std::string vec = words == 1 ? "" : ".v" + std::to_string(words);
  std::string dst = words == 1 ? outs : "{" + outs + "}";
  bool masked = !(llvm::isa<llvm::ConstantInt>(cond) && llvm::cast<llvm::ConstantInt>(cond)->isOne());
  std::string text;
  std::vector<llvm::Value *> args{b.CreatePtrToInt(p, b.getInt64Ty())};
  std::vector<llvm::Type *> arg_types{b.getInt64Ty()};
  if (masked) {
    text = "{ .reg .pred p; setp.ne.b32 p, $" + std::to_string(words + 1) + ", 0; @p ld.global" + vec + ".b32 " + dst +
           ", [$" + std::to_string(words) + "]; }";
    cons += "l,r";
    args.push_back(b.CreateZExt(cond, b.getInt32Ty()));
    arg_types.push_back(b.getInt32Ty());
  } else {
    text = "ld.global" + vec + ".b32 " + dst + ", [$" + std::to_string(words) + "];";
    cons += "l";
  }
  cons += ",~{memory}";
  llvm::Type *ret = words == 1 ? static_cast<llvm::Type *>(b.getInt32Ty())
                               : llvm::StructType::get(L.ctx, std::vector<llvm::Type *>(size_t(words), b.getInt32Ty()));
  auto *fty = llvm::FunctionType::get(ret, arg_types, false);
  llvm::Value *r = b.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true), args);
  if (words == 1) return r;
  llvm::Value *vecv = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt32Ty(), unsigned(words)));
  for (int64_t i = 0; i < words; ++i) vecv = b.CreateInsertElement(vecv, b.CreateExtractValue(r, {unsigned(i)}), uint64_t(i));
  return vecv;
}

/// red.global.add.v{2,4}.f32 of xs (consecutive elements at p, aligned for all of them), predicated on cond.
void red_add_f32(Lowering &L, llvm::Value *p, const std::vector<llvm::Value *> &xs, llvm::Value *cond) {
  auto &b = L.b;
  const int n = int(xs.size());
  std::string vals;
  for (int i = 0; i < n; ++i) vals += fmt::format("{}${}", i ? ", " : "", i + 2);
  std::string text =
      fmt::format("{{ .reg .pred p; setp.ne.b32 p, $1, 0; @p red.global.add.v{}.f32 [$0], {{{}}}; }}", n, vals);
  std::string cons = "l,r";
  for (int i = 0; i < n; ++i) cons += ",f";
  cons += ",~{memory}";
  std::vector<llvm::Type *> types{b.getInt64Ty(), b.getInt32Ty()};
  std::vector<llvm::Value *> args{b.CreatePtrToInt(p, b.getInt64Ty()), b.CreateZExt(cond, b.getInt32Ty())};
  for (llvm::Value *x : xs) {
    types.push_back(b.getFloatTy());
    args.push_back(x);
  }
  auto *fty = llvm::FunctionType::get(b.getVoidTy(), types, false);
  b.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true), args);
}

/// Whether a store or atomic of val to ptr (under mask) can work in val's own layout: its addresses and mask
/// can be recomputed in any layout (rematerializable), so nothing is converted through shared memory.
bool in_value_layout(Lowering &L, const ir::Value *val, const ir::Value *ptr, const ir::Value *mask) {
  auto remat = [&](const ir::Value *x) { return x->type.is_scalar() || L.is_remat(x); };
  return !val->type.is_scalar() && remat(ptr) && (!mask || remat(mask));
}

/// Loads `v` consecutive elements at p (alignment v·esize); returns the register values.
std::vector<llvm::Value *> load_group(Lowering &L, llvm::Value *p, ElemType et, int64_t v, llvm::Value *cond,
                                      const std::vector<llvm::Value *> &other) {
  auto &b = L.b;
  llvm::Type *mt = L.mem_type(et);
  int64_t esize = int64_t(L.mod.getDataLayout().getTypeAllocSize(mt));
  if (v > 1 && esize < 4 && (esize * v) % 4 == 0) {
    llvm::Value *words = asm_load_words(L, p, esize * v / 4, cond);
    llvm::Value *elems = b.CreateBitCast(words, llvm::FixedVectorType::get(mt, unsigned(v)));
    std::vector<llvm::Value *> out;
    for (int64_t e = 0; e < v; ++e) out.push_back(L.from_mem(b.CreateExtractElement(elems, uint64_t(e)), et));
    return out;
  }
  llvm::Type *ty = access_type(L, mt, esize, v);
  llvm::Align align(uint64_t(esize * v));
  llvm::Value *loaded;
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(cond); c && c->isOne()) {
    loaded = b.CreateAlignedLoad(ty, p, align);
  } else {
    llvm::BasicBlock *before = b.GetInsertBlock();
    llvm::BasicBlock *then = L.new_block("load.then"), *done = L.new_block("load.end");
    b.CreateCondBr(cond, then, done);
    b.SetInsertPoint(then);
    llvm::Value *x = b.CreateAlignedLoad(ty, p, align);
    b.CreateBr(done);
    b.SetInsertPoint(done);
    auto *phi = b.CreatePHI(ty, 2);
    phi->addIncoming(x, then);
    phi->addIncoming(llvm::Constant::getNullValue(ty), before);
    loaded = phi;
  }
  if (v > 1 && ty != llvm::FixedVectorType::get(mt, unsigned(v)))
    loaded = b.CreateBitCast(loaded, llvm::FixedVectorType::get(mt, unsigned(v)));
  std::vector<llvm::Value *> out;
  for (int64_t e = 0; e < v; ++e) {
    llvm::Value *x = v == 1 ? loaded : b.CreateExtractElement(loaded, uint64_t(e));
    out.push_back(L.from_mem(x, et));
  }
  (void)other;
  return out;
}

}  // namespace

Tile lower_load(Lowering &L, const ir::Op &op, const Layout *in, llvm::Value *guard) {
  auto &b = L.b;
  const ir::Value *res = op.result(), *ptr = op.operand(0);
  const ir::Value *mask = op.num_operands() > 1 ? op.operand(1) : nullptr;
  const ir::Value *other = op.num_operands() > 2 ? op.operand(2) : nullptr;
  ElemType et = res->type.elem;
  llvm::Type *rt = L.reg_type(et);
  if (res->type.is_scalar()) {
    llvm::Value *cond = mask ? L.get(mask).regs[0] : b.getTrue();
    llvm::Value *x = load_group(L, L.get(ptr).regs[0], et, 1, cond, {})[0];
    if (mask) x = b.CreateSelect(cond, x, other ? L.get(other).regs[0] : llvm::Constant::getNullValue(rt));
    return Tile{std::nullopt, {x}};
  }
  const Layout &l = in ? *in : L.layout_of(res);
  Tile p = L.get_in(ptr, l);
  Tile m = mask ? L.get_in(mask, l) : splat_tile(l, b.getTrue());
  if (guard)
    for (auto &r : m.regs) r = b.CreateAnd(r, guard);  // uniform: the vector width stays the mask's
  Tile o = other ? L.get_in(other, l) : splat_tile(l, llvm::Constant::getNullValue(rt));
  int64_t esize = int64_t(L.mod.getDataLayout().getTypeAllocSize(L.mem_type(et)));
  int64_t v = vector_width(L, l, ptr, mask, esize);
  int last = l.rank() - 1;
  Tile out{l, std::vector<llvm::Value *>(size_t(l.num_regs()), nullptr)};
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    if (out.regs[size_t(r)]) continue;
    int64_t c = canonical_reg(l, r);
    if (c != r) {
      out.regs[size_t(r)] = out.regs[size_t(c)];
      continue;
    }
    int64_t width = (l.reg_index(r)[size_t(last)] % v == 0) ? v : 1;
    auto vals = load_group(L, p.regs[size_t(r)], et, width, m.regs[size_t(r)], {});
    for (int64_t e = 0; e < width; ++e) {
      size_t re = size_t(r + e);
      out.regs[re] = mask || guard ? b.CreateSelect(m.regs[re], vals[size_t(e)], o.regs[re]) : vals[size_t(e)];
    }
  }
  return out;
}

void lower_store(Lowering &L, const ir::Op &op) {
  auto &b = L.b;
  const ir::Value *ptr = op.operand(0), *val = op.operand(1);
  const ir::Value *mask = op.num_operands() > 2 ? op.operand(2) : nullptr;
  ElemType et = val->type.elem;
  et.is_ptr = false;
  llvm::Type *mt = L.mem_type(et);
  int64_t esize = int64_t(L.mod.getDataLayout().getTypeAllocSize(mt));
  if (ptr->type.is_scalar()) {
    llvm::Value *cond = b.CreateICmpEQ(L.tid(), L.i32(0));
    if (mask) cond = b.CreateAnd(cond, L.get(mask).regs[0]);
    llvm::Value *x = L.to_mem(L.get(val).regs[0], et);
    llvm::Value *p = L.get(ptr).regs[0];
    L.emit_if(cond, [&] { b.CreateAlignedStore(x, p, llvm::Align(uint64_t(esize))); });
    return;
  }
  // A vector (e.g. attention's logsumexp, in a row slice of the MMA layout) is stored from its own layout
  // (in_value_layout): no conversion through shared memory (two barriers). Tiles keep the pointer's layout,
  // whose wide vectors coalesce better than MMA fragments.
  bool value_layout = val->type.rank() == 1 && in_value_layout(L, val, ptr, mask);
  const Layout &l = value_layout ? L.layout_of(val) : L.layout_of(ptr);
  Tile p = L.get_in(ptr, l);
  Tile x = L.get_in(val, l);
  Tile m = mask ? L.get_in(mask, l) : splat_tile(l, b.getTrue());
  int64_t v = vector_width(L, l, ptr, mask, esize);
  int last = l.rank() - 1;
  llvm::Value *owner = L.owner_pred(l);
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    if (l.reg_is_duplicate(r)) continue;
    int64_t width = v;
    if (l.reg_index(r)[size_t(last)] % v != 0) continue;  // inside a vector group already stored
    llvm::Value *data;
    if (width == 1) {
      data = L.to_mem(x.regs[size_t(r)], et);
    } else {
      data = llvm::PoisonValue::get(llvm::FixedVectorType::get(mt, unsigned(width)));
      for (int64_t e = 0; e < width; ++e) data = b.CreateInsertElement(data, L.to_mem(x.regs[size_t(r + e)], et), uint64_t(e));
      data = b.CreateBitCast(data, access_type(L, mt, esize, width));
    }
    llvm::Value *cond = b.CreateAnd(owner, m.regs[size_t(r)]);
    llvm::Value *addr = p.regs[size_t(r)];
    L.emit_if(cond, [&] { b.CreateAlignedStore(data, addr, llvm::Align(uint64_t(esize * width))); });
  }
}

Tile lower_atomic_add(Lowering &L, const ir::Op &op) {
  auto &b = L.b;
  const ir::Value *res = op.result(), *ptr = op.operand(0), *val = op.operand(1);
  const ir::Value *mask = op.num_operands() > 2 ? op.operand(2) : nullptr;
  ElemType et = res->type.elem;
  llvm::Type *rt = L.reg_type(et);
  if (et.is_ptr || et.dtype == DType::i1 || et.dtype == DType::i8 || et.dtype == DType::i16)
    L.fail(fmt::format("atomic_add of {} is not supported (use i32, i64, f16, bf16, f32 or f64)", elem_type_name(et)));
  bool fl = is_float(et.dtype);
  int64_t esize = dtype_bytes(et.dtype);
  // AcqRel for the whole program (ops.h MemOrder): the barrier orders every thread's earlier accesses before
  // the performing thread's fence (cumulativity: PTX ISA, "Memory Consistency Model"), the fence after the
  // atomic orders it before every later access, and the barrier after lets the other threads follow (the
  // pattern of a grid-wide barrier). membar.gl is fence.sc.gpu (PTX ISA, "membar / fence").
  const bool acq_rel = op.attrs.flag;
  auto fence = [&] { b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_membar_gl)); };
  auto atomic = [&](llvm::Value *addr, llvm::Value *x, llvm::Value *cond) -> llvm::Value * {
    llvm::BasicBlock *before = b.GetInsertBlock();
    llvm::BasicBlock *then = L.new_block("atomic.then"), *done = L.new_block("atomic.end");
    b.CreateCondBr(cond, then, done);
    b.SetInsertPoint(then);
    llvm::Value *old = b.CreateAtomicRMW(fl ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add, addr, x,
                                         llvm::MaybeAlign(uint64_t(esize)), llvm::AtomicOrdering::Monotonic);
    b.CreateBr(done);
    b.SetInsertPoint(done);
    auto *phi = b.CreatePHI(rt, 2);
    phi->addIncoming(old, then);
    phi->addIncoming(llvm::Constant::getNullValue(rt), before);
    return phi;
  };
  if (ptr->type.is_scalar()) {
    // One thread performs it; the old value is broadcast through shared memory.
    llvm::Value *one = b.CreateICmpEQ(L.tid(), L.i32(0));
    llvm::Value *cond = one;
    if (mask) cond = b.CreateAnd(cond, L.get(mask).regs[0]);
    if (acq_rel) {
      L.barrier();
      L.emit_if(one, fence);
    }
    llvm::Value *old = atomic(L.get(ptr).regs[0], L.get(val).regs[0], cond);
    if (acq_rel) L.emit_if(one, fence);
    // An old value nobody reads is not broadcast: no shared memory, no barriers (a learnable capture's gradient
    // adds four scalars per key block in the backward's loop).
    if (L.use_count(res) == 0) {
      if (acq_rel) L.barrier();  // the other threads' later accesses after thread 0's atomic and fence
      return Tile{std::nullopt, {llvm::Constant::getNullValue(rt)}};
    }
    L.reserve_smem(esize);
    L.barrier();
    L.emit_if(one, [&] { b.CreateAlignedStore(old, L.smem_addr(L.i32(0), rt), llvm::Align(uint64_t(esize))); });
    L.barrier();
    return Tile{std::nullopt, {b.CreateAlignedLoad(rt, L.smem_addr(L.i32(0), rt), llvm::Align(uint64_t(esize)))}};
  }
  // Atomics work in the value's own layout whenever they can (in_value_layout; e.g. a dot's MMA fragments,
  // the backward's dQ tiles): no tile-sized conversion through shared memory and its two barriers. The
  // pointer layout's wider vectors would allow red.v4 instead of red.v2, but a warp's MMA fragment already
  // covers whole 32-byte sectors (four threads × two adjacent elements per row).
  bool value_layout = in_value_layout(L, val, ptr, mask);
  const Layout &l = value_layout ? L.layout_of(val) : L.layout_of(ptr);
  Tile p = L.get_in(ptr, l);
  Tile x = L.get_in(val, l);
  Tile m = mask ? L.get_in(mask, l) : splat_tile(l, b.getTrue());
  llvm::Value *owner = L.owner_pred(l);
  Tile out{l, std::vector<llvm::Value *>(size_t(l.num_regs()), llvm::Constant::getNullValue(rt))};
  bool replicated = l.lane_replication_mask() || l.warp_replication_mask();
  const bool used = L.use_count(res) > 0;
  // An f32 sum whose old values nobody reads is added v consecutive elements at a time on sm_90
  // (red.global.add.v2/.v4.f32; PTX ISA 9.7.13.6, vector f32 reductions need sm_90): half or a quarter of
  // the instructions.
  const bool vector_red = !used && et.dtype == DType::f32 && sm_version(L.opts.arch) >= 90;
  const int64_t v = vector_red ? vector_width(L, l, ptr, mask, esize) : 1;
  int last = l.rank() - 1;
  if (acq_rel) {
    L.barrier();
    fence();
  }
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    if (l.reg_is_duplicate(r)) {
      replicated = true;
      continue;
    }
    llvm::Value *cond = b.CreateAnd(owner, m.regs[size_t(r)]);
    if (v == 1) {
      out.regs[size_t(r)] = atomic(p.regs[size_t(r)], x.regs[size_t(r)], cond);
    } else if (l.reg_index(r)[size_t(last)] % v == 0) {
      red_add_f32(L, p.regs[size_t(r)], {x.regs.begin() + r, x.regs.begin() + r + v}, cond);
    }
  }
  if (acq_rel) {
    fence();
    L.barrier();
  }
  if (!used || !replicated) return out;
  // Copies held by non-owner threads (or duplicate registers) get the owner's old value.
  const std::vector<int64_t> strides = row_major_strides(l.shape);
  return L.redistribute(out, et, l, strides, strides, /*owners_only=*/true);
}

}  // namespace tilejit::codegen
