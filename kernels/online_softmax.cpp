#include "kernels/online_softmax.h"
#include "kernels/log2_units.h"

#include <limits>

namespace tilejit::attention {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
using kernels::kLn2;


// The power of two at or below x > 0 (an f32 scalar, or a literal: then it folds at trace time). Veltkamp's
// split with 2^23 + 1 rounds y to its leading bit (the power of two nearest to y); that or half of it is at or
// below y. Exact in round-to-nearest f32 arithmetic with h rounded on its own (mul_rn: never fused), for
// y·2^23 finite and y normal: x ≥ 2^64 is scaled by 2^-64 first. For x below 2^-100 the result is not used:
// the threshold bound/x is +inf there, so no row leaves the ordinary frame.
Tile pow2_floor(const Tile &x) {
  Tile big = x >= 0x1p64f;
  Tile y = where(big, x * 0x1p-64f, x);
  Tile h = mul_rn(y, 8388609.f);  // 2^23 + 1
  Tile lead = h - (h - y);
  Tile p = where(lead > y, lead * 0.5f, lead);
  return where(big, p * 0x1p64f, p);
}

}  // namespace

// |m·c| below which a row keeps the ordinary frame: m·c − R ≤ 8 (f16) or ≤ 32 (bf16), see the header.
float OnlineSoftmax::ordinary_bound(DType dt) { return dt == DType::f16 ? 0x1p28f : 0x1p30f; }

OnlineSoftmax::OnlineSoftmax(int rows, const Tile &c, const Tile &natural, DType dt, Range range)
    : c_(c), natural_(natural), exact_frames_(range == Range::AnyFinite) {
  m_ = full({rows}, kNegInf, DType::f32);
  if (!exact_frames_) return;
  const float bound = ordinary_bound(dt);
  // |m| < bound / c ⇔ |m·c| < bound (up to the quotient's rounding, which only moves the switch by an ulp).
  // For c below bound / FLT_MAX the quotient is +inf: every finite m is ordinary, as |m·c| < bound there.
  exact_ = pow2_floor(c);
  threshold_ = bound / c;
}

Tile OnlineSoftmax::ordinary(const Tile &m) const { return abs(m) < threshold_; }

OnlineSoftmax::Step OnlineSoftmax::step(const Tile &s) {
  if (!exact_frames_) {
    // The ordinary frame only, the running max kept in log2 units: R = m·c, max(s)·c = max(s·c) as c > 0.
    Tile m_new = maximum(m_, max(s, 1) * c_);
    Tile m_sub = where(m_new == kNegInf, 0.f, m_new);  // a row with no key so far: exp2 gives 0, not NaN
    Tile p = exp2(fma(s, c_, -m_sub(_, None)));
    Tile alpha = exp2(m_ - m_sub);
    m_ = m_new;
    return {p, alpha};
  }
  Tile m_new = maximum(m_, max(s, 1));
  Tile ord = ordinary(m_new);
  Tile c_row = where(ord, c_, exact_);
  Tile r_new = mul_rn(m_new, c_row);  // −inf while the row has seen no key (c_row > 0)
  // Such a row subtracts 0 instead, so that exp2 gives 0 for its −inf scores, not NaN.
  Tile r_sub = where(r_new == kNegInf, 0.f, r_new);
  Tile p = exp2(fma(s, c_row(_, None), -r_sub(_, None)));
  // Earlier blocks' p were taken against m_·c_old in m_'s frame: where the frame is the same (c_old = c_row, so
  // the product is that reference again, bit for bit) they are rescaled by 2^(m_·c_row − r_sub); where it
  // changed, by 0 (see the header). An empty row's m_ is −inf: 0 either way. Recomputing the old reference
  // costs a multiply per row; carrying it would hold a register per row across the loop. (ord first: codegen
  // gives the comparison its first operand's layout while the loop-carried m_'s is still open, and ord is in
  // the scores' row layout, which alpha and l_i then keep.)
  Tile alpha = exp2(where(ord == ordinary(m_), mul_rn(m_, c_row) - r_sub, kNegInf));
  m_ = m_new;
  return {p, alpha};
}

Tile OnlineSoftmax::lse(const Tile &l) const {
  Tile l_safe = where(l == 0.f, 1.f, l);
  if (!exact_frames_) return where(l == 0.f, kNegInf, (m_ + log2(l_safe)) * kLn2);
  // The ordinary frame: R + log2 l in log2 units (R's rounding cancels against l's). The exact frame: m·c may
  // overflow where the natural m·(c·ln2) does not, and l counts the ties of the max.
  Tile log2_l = log2(l_safe);
  Tile ord = ordinary(m_);
  Tile lse = where(ord, (mul_rn(m_, c_) + log2_l) * kLn2, fma(m_, natural_, log2_l * kLn2));
  return where(l == 0.f, kNegInf, lse);
}

}  // namespace tilejit::attention
