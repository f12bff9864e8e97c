// exp2 on the FMA pipe: a polynomial in place of ex2.approx for part of a tile, so the softmax's
// exponentials do not all queue on the special-function unit (16 results per clock per SM on Hopper, against
// 128 fma) — the idea of FlashAttention-4 (software exp2 emulation), with our own fit.
#pragma once
#include <llvm/IR/Value.h>

namespace tilejit::codegen {

struct Lowering;

/// 2^x for an f32 x: round x to the nearest integer j with the 1.5·2^23 trick, a degree-3 polynomial for
/// 2^(x−j) on [−0.5, 0.5] (relative-error fit, max relative error 7.5e-5 — below bf16's and f16's
/// resolution of the probabilities it feeds), and j added to the exponent bits. x < −125 gives 0 (as
/// ex2.approx.ftz), +inf/NaN as ex2 does; x ≥ 128 gives +inf.
llvm::Value *exp2_on_fma(Lowering &L, llvm::Value *x);

}  // namespace tilejit::codegen
