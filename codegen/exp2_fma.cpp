#include "codegen/exp2_fma.h"

#include <limits>

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/lowering.h"

namespace tilejit::codegen {

llvm::Value *exp2_on_fma(Lowering &L, llvm::Value *x) {
  auto &b = L.b;
  llvm::Type *f32 = b.getFloatTy(), *i32 = b.getInt32Ty();
  auto c = [&](float v) { return llvm::ConstantFP::get(f32, v); };
  // Clamp into [−127, 128] (NaN passes through the selects and is restored at the end).
  llvm::Value *xc = b.CreateSelect(b.CreateFCmpOLT(x, c(-127.f)), c(-127.f), x);
  xc = b.CreateSelect(b.CreateFCmpOGT(xc, c(128.f)), c(128.f), xc);
  // t's low mantissa bits hold j = round(xc); f = xc − j ∈ [−0.5, 0.5].
  constexpr float kMagic = 12582912.f;  // 1.5·2^23
  llvm::Value *t = b.CreateFAdd(xc, c(kMagic));
  llvm::Value *f = b.CreateFSub(xc, b.CreateFSub(t, c(kMagic)));
  // 2^f ≈ ((c3·f + c2)·f + c1)·f + c0 (fitted for relative error on [−0.5, 0.5]).
  auto fma = [&](llvm::Value *a, llvm::Value *m, llvm::Value *add) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {a, m, add});
  };
  llvm::Value *p = fma(c(0.055171650f), f, c(0.24261115f));
  p = fma(p, f, c(0.69326097f));
  p = fma(p, f, c(0.99992806f));
  // Scale by 2^j: add j to the exponent field. bits(t) = bits(kMagic) + j, so j·2^23 = (bits(t) − bits(kMagic))·2^23.
  llvm::Value *tj = b.CreateSub(b.CreateBitCast(t, i32), llvm::ConstantInt::get(i32, 0x4B400000));
  llvm::Value *r = b.CreateBitCast(b.CreateAdd(b.CreateBitCast(p, i32), b.CreateShl(tj, 23)), f32);
  r = b.CreateSelect(b.CreateFCmpOLT(x, c(-125.f)), c(0.f), r);  // 2^-125: flushed (p(0) < 1 would go subnormal)
  r = b.CreateSelect(b.CreateFCmpOGE(x, c(128.f)), c(std::numeric_limits<float>::infinity()), r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

}  // namespace tilejit::codegen
