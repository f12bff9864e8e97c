// Sources (constants, program ids, arange), elementwise arithmetic, math functions, casts and pointer
// arithmetic. f16/bf16 arithmetic and math are computed in f32 and rounded once to the dtype, matching the
// interpreter's numerics. Transcendentals use the PTX approximations (ex2/lg2/rsqrt/tanh .approx).
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <numbers>

#include "codegen/lowering.h"

namespace tilejit::codegen {

Tile splat_tile(const Layout &l, llvm::Value *v) { return Tile{l, std::vector<llvm::Value *>(size_t(l.num_regs()), v)}; }

namespace {

llvm::Value *constant_of(Lowering &L, const ir::Op &op) {
  ElemType et = op.result()->type.elem;
  llvm::Type *ty = L.reg_type(et);
  if (et.is_ptr) L.fail("pointer constants are not supported");
  if (is_float(et.dtype)) return llvm::ConstantFP::get(ty, op.attrs.fvalue);
  if (et.dtype == DType::i1) return L.b.getInt1(op.attrs.ivalue != 0);
  return llvm::ConstantInt::get(ty, uint64_t(op.attrs.ivalue), true);
}

llvm::Value *special_register(Lowering &L, const ir::Op &op) {
  using namespace llvm;
  static const Intrinsic::ID ctaid[] = {Intrinsic::nvvm_read_ptx_sreg_ctaid_x, Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                        Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  static const Intrinsic::ID nctaid[] = {Intrinsic::nvvm_read_ptx_sreg_nctaid_x,
                                         Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                         Intrinsic::nvvm_read_ptx_sreg_nctaid_z};
  int64_t axis = op.attrs.axis;
  if (axis < 0 || axis > 2) L.fail(fmt::format("axis {} is out of range (0..2)", axis));
  auto id = op.kind == ir::OpKind::ProgramId ? ctaid[axis] : nctaid[axis];
  llvm::Value *v = L.b.CreateCall(L.intrinsic(id));
  return L.b.CreateZExtOrTrunc(v, L.reg_type(op.result()->type.elem));
}

llvm::Value *ext(Lowering &L, llvm::Value *v, DType t) {
  if (t == DType::f16 || t == DType::bf16) return L.b.CreateFPExt(v, L.b.getFloatTy());
  return v;
}
llvm::Value *round_to(Lowering &L, llvm::Value *v, DType t) {
  if (t == DType::f16 || t == DType::bf16) return L.b.CreateFPTrunc(v, L.reg_type(ElemType{t, false}));
  return v;
}

// Unary float math on an f32 or f64 value.
llvm::Value *float_math(Lowering &L, ir::OpKind k, llvm::Value *x) {
  using namespace llvm;
  auto &b = L.b;
  bool f64 = x->getType()->isDoubleTy();
  auto call = [&](Intrinsic::ID f32_id, Intrinsic::ID f64_id, Value *arg) -> Value * {
    return b.CreateCall(L.intrinsic(f64 ? f64_id : f32_id), {arg});
  };
  auto c = [&](double v) { return ConstantFP::get(x->getType(), v); };
  switch (k) {
    // ex2/lg2 in their .ftz forms: one MUFU instruction each. Without .ftz ptxas wraps every ex2 in a range
    // check and two predicated multiplies to produce subnormal results (4 issue slots instead of 1 in a
    // softmax's inner loop); with it, results below 2^-126 (and subnormal inputs of lg2) flush to 0, as
    // every attention kernel's exp2 may (PTX ISA, "ex2": .ftz; its subnormal handling).
    case ir::OpKind::Exp:
      return call(Intrinsic::nvvm_ex2_approx_ftz_f, Intrinsic::nvvm_ex2_approx_d, b.CreateFMul(x, c(std::numbers::log2e)));
    case ir::OpKind::Exp2:
      return call(Intrinsic::nvvm_ex2_approx_ftz_f, Intrinsic::nvvm_ex2_approx_d, x);
    case ir::OpKind::Log:
      return b.CreateFMul(call(Intrinsic::nvvm_lg2_approx_ftz_f, Intrinsic::nvvm_lg2_approx_d, x), c(std::numbers::ln2));
    case ir::OpKind::Log2:
      return call(Intrinsic::nvvm_lg2_approx_ftz_f, Intrinsic::nvvm_lg2_approx_d, x);
    case ir::OpKind::Sqrt:
      return b.CreateCall(L.intrinsic(Intrinsic::sqrt, {x->getType()}), {x});
    case ir::OpKind::Rsqrt:
      return call(Intrinsic::nvvm_rsqrt_approx_f, Intrinsic::nvvm_rsqrt_approx_d, x);
    case ir::OpKind::Abs:
      return b.CreateCall(L.intrinsic(Intrinsic::fabs, {x->getType()}), {x});
    case ir::OpKind::Tanh: {
      // tanh.approx.f32 (sm_75+) has no LLVM 19 intrinsic: inline PTX. f64 goes through f32.
      Value *xf = f64 ? b.CreateFPTrunc(x, b.getFloatTy()) : x;
      auto *fty = FunctionType::get(b.getFloatTy(), {b.getFloatTy()}, false);
      auto *asm_ = InlineAsm::get(fty, "tanh.approx.f32 $0, $1;", "=f,f", false);
      Value *r = b.CreateCall(fty, asm_, {xf});
      return f64 ? b.CreateFPExt(r, b.getDoubleTy()) : r;
    }
    case ir::OpKind::Sigmoid: {
      Value *e = call(Intrinsic::nvvm_ex2_approx_ftz_f, Intrinsic::nvvm_ex2_approx_d,
                      b.CreateFMul(x, c(-std::numbers::log2e)));
      return b.CreateFDiv(c(1.0), b.CreateFAdd(c(1.0), e));
    }
    default:
      L.fail("internal: not a float math op");
  }
}

llvm::CmpInst::Predicate float_pred(ir::CmpPred p) {
  using P = llvm::CmpInst::Predicate;
  switch (p) {
    case ir::CmpPred::eq: return P::FCMP_OEQ;
    case ir::CmpPred::ne: return P::FCMP_UNE;
    case ir::CmpPred::lt: return P::FCMP_OLT;
    case ir::CmpPred::le: return P::FCMP_OLE;
    case ir::CmpPred::gt: return P::FCMP_OGT;
    case ir::CmpPred::ge: return P::FCMP_OGE;
  }
  return P::FCMP_OEQ;
}

llvm::CmpInst::Predicate int_pred(ir::CmpPred p, bool is_signed) {
  using P = llvm::CmpInst::Predicate;
  switch (p) {
    case ir::CmpPred::eq: return P::ICMP_EQ;
    case ir::CmpPred::ne: return P::ICMP_NE;
    case ir::CmpPred::lt: return is_signed ? P::ICMP_SLT : P::ICMP_ULT;
    case ir::CmpPred::le: return is_signed ? P::ICMP_SLE : P::ICMP_ULE;
    case ir::CmpPred::gt: return is_signed ? P::ICMP_SGT : P::ICMP_UGT;
    case ir::CmpPred::ge: return is_signed ? P::ICMP_SGE : P::ICMP_UGE;
  }
  return P::ICMP_EQ;
}

}  // namespace

llvm::Value *cast_value(Lowering &L, llvm::Value *v, DType from, DType to) {
  auto &b = L.b;
  if (from == to) return v;
  llvm::Type *dst = L.reg_type(ElemType{to, false});
  if (to == DType::i1) {
    if (is_float(from)) return b.CreateFCmpUNE(ext(L, v, from), llvm::ConstantFP::get(L.compute_type(from), 0.0));
    return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (is_int(from) && is_int(to)) return from == DType::i1 ? b.CreateZExt(v, dst) : b.CreateSExtOrTrunc(v, dst);
  if (is_int(from)) {  // int → float: convert to f32/f64, then round to the 16-bit type if needed
    llvm::Type *wide = L.compute_type(to);
    if (from == DType::i1) return round_to(L, b.CreateUIToFP(v, wide), to);
    // A signed conversion to f32 goes through NVVM's cvt.rn intrinsic, which LLVM does not see through: its
    // instcombine turns f32(a) − f32(b) back into f32(a − b) (foldFBinOpOfIntCasts) when it proves the
    // difference exact, which undoes convert_before_broadcast (ir/passes): the conversions of a row's and a
    // column's positions become a conversion per element, on a quarter-rate unit shared with exp2.
    if (wide->isFloatTy()) {
      const bool wide_src = from == DType::i64;
      if (!wide_src) v = b.CreateSExtOrTrunc(v, b.getInt32Ty());
      auto id = wide_src ? llvm::Intrinsic::nvvm_ll2f_rn : llvm::Intrinsic::nvvm_i2f_rn;
      return round_to(L, b.CreateCall(L.intrinsic(id), {v}), to);
    }
    return round_to(L, b.CreateSIToFP(v, wide), to);
  }
  if (is_int(to)) return b.CreateFPToSI(ext(L, v, from), dst);  // truncates toward zero
  // float → float
  llvm::Value *x = ext(L, v, from);
  if (to == DType::f64) return b.CreateFPExt(x, dst);
  if (x->getType()->isDoubleTy()) x = b.CreateFPTrunc(x, b.getFloatTy());
  return to == DType::f32 ? x : b.CreateFPTrunc(x, dst);
}

llvm::Value *elementwise_scalar(Lowering &L, const ir::Op &op, const std::vector<llvm::Value *> &a) {
  using K = ir::OpKind;
  auto &b = L.b;
  DType rt = op.result()->type.dtype();
  DType t0 = op.operand(0)->type.dtype();
  bool fl = is_float(t0) && !op.operand(0)->type.is_ptr();
  auto binary_float = [&](auto &&f) { return round_to(L, f(ext(L, a[0], t0), ext(L, a[1], t0)), t0); };
  switch (op.kind) {
    case K::Add: return fl ? binary_float([&](auto x, auto y) { return b.CreateFAdd(x, y); }) : b.CreateAdd(a[0], a[1]);
    case K::Sub: return fl ? binary_float([&](auto x, auto y) { return b.CreateFSub(x, y); }) : b.CreateSub(a[0], a[1]);
    case K::Mul: return fl ? binary_float([&](auto x, auto y) { return b.CreateFMul(x, y); }) : b.CreateMul(a[0], a[1]);
    case K::Div: return fl ? binary_float([&](auto x, auto y) { return b.CreateFDiv(x, y); }) : b.CreateSDiv(a[0], a[1]);
    case K::Rem: return fl ? binary_float([&](auto x, auto y) { return b.CreateFRem(x, y); }) : b.CreateSRem(a[0], a[1]);
    case K::Minimum:
      if (fl) return binary_float([&](auto x, auto y) { return b.CreateMinNum(x, y); });
      return b.CreateBinaryIntrinsic(t0 == DType::i1 ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a[0], a[1]);
    case K::Maximum:
      if (fl) return binary_float([&](auto x, auto y) { return b.CreateMaxNum(x, y); });
      return b.CreateBinaryIntrinsic(t0 == DType::i1 ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a[0], a[1]);
    case K::And: return b.CreateAnd(a[0], a[1]);
    case K::Or: return b.CreateOr(a[0], a[1]);
    case K::Xor: return b.CreateXor(a[0], a[1]);
    case K::Shl: return b.CreateShl(a[0], b.CreateSExtOrTrunc(a[1], a[0]->getType()));
    case K::Shr: return b.CreateAShr(a[0], b.CreateSExtOrTrunc(a[1], a[0]->getType()));
    case K::Cmp:
      if (op.operand(0)->type.is_ptr()) return b.CreateICmp(int_pred(op.attrs.pred, false), a[0], a[1]);
      if (fl) return b.CreateFCmp(float_pred(op.attrs.pred), ext(L, a[0], t0), ext(L, a[1], t0));
      return b.CreateICmp(int_pred(op.attrs.pred, t0 != DType::i1), a[0], a[1]);
    case K::Neg: return fl ? round_to(L, b.CreateFNeg(ext(L, a[0], t0)), t0) : b.CreateNeg(a[0]);
    case K::Not: return b.CreateNot(a[0]);
    case K::Abs:
      if (!fl) return b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a[0], b.getFalse());
      [[fallthrough]];
    case K::Exp: case K::Exp2: case K::Log: case K::Log2: case K::Sqrt: case K::Rsqrt: case K::Tanh:
    case K::Sigmoid:
      if (!fl) L.fail(fmt::format("{} needs a float operand, got {}", ir::op_name(op.kind), dtype_name(t0)));
      return round_to(L, float_math(L, op.kind, ext(L, a[0], t0)), t0);
    case K::Fma: {
      if (!fl) L.fail(fmt::format("fma needs float operands, got {}", dtype_name(t0)));
      llvm::Value *x = ext(L, a[0], t0), *y = ext(L, a[1], t0), *z = ext(L, a[2], t0);
      return round_to(L, b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z}), t0);
    }
    case K::Select: return b.CreateSelect(a[0], a[1], a[2]);
    case K::Cast:
      if (op.operand(0)->type.is_ptr() || op.result()->type.is_ptr()) L.fail("casts of pointers are not supported");
      return cast_value(L, a[0], t0, rt);
    case K::PtrAdd: {
      llvm::Value *off = b.CreateSExtOrTrunc(a[1], b.getInt64Ty());
      return b.CreateGEP(L.mem_type(ElemType{op.result()->type.dtype(), false}), a[0], off);
    }
    default:
      L.fail("internal: not an elementwise op");
  }
}

Tile lower_source(Lowering &L, const ir::Op &op, const Layout *forced) {
  const ir::Value *res = op.result();
  using K = ir::OpKind;
  if (op.kind == K::ProgramId || op.kind == K::NumPrograms) return Tile{std::nullopt, {special_register(L, op)}};
  if (op.kind == K::Constant) {
    llvm::Value *c = constant_of(L, op);
    if (res->type.is_scalar()) return Tile{std::nullopt, {c}};
    return splat_tile(forced ? *forced : L.layout_of(res), c);
  }
  // Arange: element at coordinate c is start + c.
  const Layout &l = forced ? *forced : L.layout_of(res);
  int64_t start = op.attrs.ints.at(0);
  Tile t{l, {}};
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    llvm::Value *c = L.coord(l, 0, r);
    t.regs.push_back(start ? L.b.CreateAdd(c, L.i32(start)) : c);
  }
  if (res->type.dtype() != DType::i32)
    for (auto &v : t.regs) v = L.b.CreateSExtOrTrunc(v, L.reg_type(res->type.elem));
  return t;
}

Tile lower_elementwise(Lowering &L, const ir::Op &op, const Layout *forced) {
  const ir::Value *res = op.result();
  if (res->type.is_scalar()) {
    std::vector<llvm::Value *> args;
    for (auto *o : op.operands) {
      const Tile &t = L.get(o);
      if (!t.is_scalar()) L.fail("internal: a tile operand of a scalar elementwise op");
      args.push_back(t.regs[0]);
    }
    return Tile{std::nullopt, {elementwise_scalar(L, op, args)}};
  }
  const Layout &l = forced ? *forced : L.layout_of(res);
  if (auto t = lower_index_to_f32(L, op, l)) return *t;
  if (auto t = lower_fma_index(L, op, l)) return *t;
  if (auto t = lower_split_consumer(L, op, l)) return *t;
  std::vector<Tile> in;
  for (auto *o : op.operands) in.push_back(L.get_in(o, l));
  Tile out{l, {}};
  std::vector<llvm::Value *> args(in.size());
  for (int64_t r = 0; r < l.num_regs(); ++r) {
    for (size_t i = 0; i < in.size(); ++i) args[i] = in[i].regs[size_t(r)];
    out.regs.push_back(elementwise_scalar(L, op, args));
  }
  return out;
}

}  // namespace tilejit::codegen
