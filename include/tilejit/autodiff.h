// Reverse-mode differentiation of traced tile code (a vector-Jacobian product at trace time).
//
// While a kernel is traced, `vjp(out, wrt, dout)` walks the ops that computed `out` from `wrt` backwards
// and appends their adjoints to the trace: the result is the gradient of Σ dout ∘ out with respect to wrt,
// as ordinary tile ops that run (and are optimized) like the rest of the kernel. This is how a score_mod's
// gradient is derived from the IR the user's lambda traced, with no hand-written backward per mod (the
// reverse sweep of Griewank & Walther, "Evaluating Derivatives", 2nd ed., ch. 3).
#pragma once
#include "tilejit/ops.h"
#include "tilejit/tile.h"

namespace tilejit {

/// The gradient of Σ dout ∘ out with respect to `wrt`: an f32 tile of wrt's shape.
///
/// out: a float tile computed from wrt by ops of the block being traced (the ops between them must have no
/// regions: no if_/for_range on the path). wrt: a float tile (f32, f16 or bf16). dout: a float tile or
/// literal broadcastable to out's shape. Adjoints are computed in f32.
///
/// Derivatives: add, sub, mul, div, neg, fma; exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid; abs (its
/// subgradient 0 at 0); minimum and maximum (a tie goes to the first operand); where (the gradient goes to
/// the branch taken, none to the condition); float casts; shape ops (splat, broadcast, expand_dims,
/// reshape, trans: the adjoint sums over broadcast dims); sum reductions. Integer and i1 values (positions,
/// comparisons, masks) and loads carry no gradient to wrt: a value read from memory is a constant of the
/// differentiation. A value that does not depend on wrt gives a zero gradient.
///
/// As in every reverse-mode system, a `where` whose untaken branch has an infinite or NaN derivative (log of
/// 0, sqrt of 0) gives NaN there: 0 · inf. Guard the branch's input instead.
///
/// Loads from a capture made with a gradient buffer (capture(b, DType::f32, grad), tilejit/capture.h) are the
/// exception, with CaptureGrads::Scatter: the loaded value's gradient is added into grad at the same
/// element offsets (f32 atomic_add; the address must be the capture plus offsets, through shape ops), so a
/// learnable table read by a score_mod gets its gradient. The order of those additions changes from run to
/// run, and so do the sums' last bits. CaptureGrads::ScatterFixedPoint adds each term instead as integers
/// into the capture's fixed-point accumulator (CaptureState::grad_fixed_point: four i64 per gradient element,
/// which the launching code — attention::flex_backward — points at zeroed memory and adds into grad afterwards;
/// unbound, the adds go to address 0): round(g·2^20) and the remainder in units of 2^-52 (half away from
/// zero), and counts of +inf and −inf terms (a NaN counts as both, so the result is NaN, as a float sum would
/// be; a term with |g| ≥ 2^41 counts as an infinity of its sign: an overflow). Integer sums do not depend on
/// the order, so the result is bitwise reproducible; each term is rounded to 2^-53 (absolute), and the sums
/// are exact while |Σ| < 2^42 and a gradient element has fewer than 2^32 terms (past that they wrap around,
/// unseen). The technique of GPU molecular dynamics' fixed-point force sums (Le
/// Grand, Götz & Walker, Comput. Phys. Commun. 184, 2013), with a second word for the low bits.
/// CaptureGrads::Ignore leaves them constants (a second sweep over the same ops, e.g. for dQ, must not add
/// them twice).
///
/// Throws TraceError naming the op and its source line for an op on the path without a derivative here
/// (rem, max/min reductions, dot, atomic_add, control flow), and for non-float out, wrt or dout.
enum class CaptureGrads { Scatter, ScatterFixedPoint, Ignore };
/// CaptureGrads::ScatterFixedPoint's units: 2^-kFixedPointHighBits for the high word, 2^-kFixedPointLowBits
/// for the low one; kFixedPointSlots i64 per gradient element (high, low, +inf count, −inf count).
inline constexpr int kFixedPointHighBits = 20, kFixedPointLowBits = 52, kFixedPointSlots = 4;
Tile vjp(const Tile &out, const Tile &wrt, const Tile &dout, CaptureGrads captures = CaptureGrads::Scatter,
         SrcLoc loc = SrcLoc::current());

}  // namespace tilejit
