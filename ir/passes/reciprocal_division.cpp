// reciprocal_division: an f32 division whose divisor is a constant (`score / 50.f`) or is broadcast from fewer
// elements — a scalar (a captured cap: `score / cap`), one value per row or per column — becomes a
// multiplication by the divisor's reciprocal, computed once per element of the divisor where the divisor is
// defined (outside the loop when it is; a constant's at compile time, rounded as 1/b at run time would be). An IEEE
// division costs a dozen instructions and a slow path per element; this is one multiplication. Two roundings
// instead of one: where 1/b is a normal f32 (2^-126 < |b| < 2^126), a relative error of at most
// 2^-23 + 2^-48 (2 ulp; CUDA's -prec-div=false and Triton's div.full.f32 allow 2 ulp too), and the same
// special values (NaN, ±inf, ±0) as the division. Outside that range a·(1/b) may be ±inf or lose precision
// where a/b is finite. An exact quotient may come out an ulp low (41/41 = 0.99999994): floor() or an integer
// cast of a quotient wants div_rn (tilejit/ops.h), which this pass leaves alone. Only f32: a reciprocal
// rounded to f16 or bf16 overflows early (1/b for |b| < 2^-16 in f16) and doubles a narrow type's error, and
// f64 divisions are rare. The interpreter runs the rewritten IR too, so both backends agree.
#include <cmath>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
void reciprocal_division(Function &fn) {
  std::vector<Op *> divisions;
  walk(*fn.body, [&](Op &op) {
    if (op.kind == OpKind::Div && !op.attrs.flag && !op.result()->type.is_ptr() &&
        op.result()->type.dtype() == DType::f32)
      divisions.push_back(&op);
  });
  for (Op *div : divisions) {
    if (auto c = passes::constant_of(div->operand(1))) {
      // A constant divisor (`score / 50.f`): its reciprocal, correctly rounded as 1/b at run time would be, where
      // that is a normal f32 (else x / b stays: 0 / 1e-40 must not become 0·inf).
      const float r_value = 1.0f / float(c->f);
      if (!std::isnormal(r_value)) continue;
      Builder b(div->parent);
      b.set_insertion_point(div->parent, passes::index_of(div));
      Attrs r;
      r.fvalue = double(r_value);
      div->kind = OpKind::Mul;
      div->operands[1] = b.create1(OpKind::Constant, {}, div->operand(1)->type, r, div->loc);
      continue;
    }
    if (passes::source_elements(div->operand(1)) >= div->result()->type.numel()) continue;
    // 1 / source where source is defined, replicated as the divisor was, then the product where the division was.
    Value *r = passes::on_distinct_elements(div->operand(1), div, [&](Builder &b, Value *x) {
      Attrs one;
      one.fvalue = 1.0;
      Value *c1 = b.create1(OpKind::Constant, {}, x->type, one, div->loc);
      return b.create1(OpKind::Div, {c1, x}, x->type, {}, div->loc);
    });
    div->kind = OpKind::Mul;
    div->operands[1] = r;
  }
}

}  // namespace tilejit::ir
