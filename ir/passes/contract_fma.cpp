// contract_fma: an f32 product whose only use is an addition or a subtraction becomes one fused multiply-add, as
// CUDA C++ and Triton compile a·b + c by default:
//   a·b + c, c + a·b → fma(a, b, c)      c − a·b → fma(−a, b, c)      a·b − c → fma(a, b, −c)
// A negated operand replicated from fewer elements (a captured scalar, a row's or a column's value) is negated
// once per element of its source, where the source is defined; a constant at compile time; a full tile's
// negation costs nothing on the GPU, where ptxas takes it into the fma. Only a product of the sum's own block
// fuses (one made in front of a loop stays: fusing would keep both factors live through the loop). A user's
// `score − slope·|q − kv|` then costs one instruction per score where it cost two. Numerics: the fma rounds
// once where the written order rounded the product and then the sum, so a result moves by at most the
// product's rounding error (half an ulp of a·b) before the sum's own rounding. Only with FloatRewrites::Fast,
// only for f32 (a bf16 or f16 expression rounds each step to its own type), and only where the product has no
// other use (else it would still be computed); mul_rn's products (tilejit/ops.h) are kept. The interpreter
// runs the rewritten IR too, so both backends agree.
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

bool is_f32(const Value *v) { return !v->type.is_ptr() && v->type.dtype() == DType::f32; }

/// −v for `user`: a constant negated at compile time; otherwise once per distinct element (before v's
/// replication, where v's source is defined).
Value *negated(Value *v, Op *user) {
  if (auto c = passes::constant_of(v)) {
    Builder b(user->parent);
    b.set_insertion_point(user->parent, passes::index_of(user));
    Attrs a;
    a.fvalue = -c->f;
    return b.create1(OpKind::Constant, {}, v->type, a, user->loc);
  }
  return passes::on_distinct_elements(
      v, user, [&](Builder &b, Value *x) { return b.create1(OpKind::Neg, {x}, x->type, {}, user->loc); });
}

/// How many distinct values v holds: 1 for a constant, else as many as its replicated source.
int64_t distinct_elements(const Value *v) { return passes::constant_of(v) ? 1 : passes::source_elements(v); }

}  // namespace

void contract_fma(Function &fn) {
  std::vector<Op *> sums;
  walk(*fn.body, [&](Op &op) {
    if ((op.kind == OpKind::Add || op.kind == OpKind::Sub) && is_f32(op.result())) sums.push_back(&op);
  });
  auto uses = use_counts(*fn.body);
  // A product of the sum's block only: one computed in front of a loop and added inside it would keep both
  // factors live through the loop instead of the product.
  auto product = [&](const Value *v, const Op *sum) -> const Op * {
    const Op *d = v->def;
    if (!d || d->kind != OpKind::Mul || d->attrs.flag || d->parent != sum->parent || !is_f32(v) || uses[v] != 1)
      return nullptr;
    return d;
  };
  for (Op *sum : sums) {
    // The product to fuse: the left operand's, else the right one's.
    const int at = product(sum->operand(0), sum) ? 0 : product(sum->operand(1), sum) ? 1 : -1;
    if (at < 0) continue;
    const Op *mul = sum->operand(at)->def;
    Value *a = mul->operand(0), *m = mul->operand(1), *c = sum->operand(1 - at);
    if (sum->kind == OpKind::Sub) {
      if (at == 0) c = negated(c, sum);                                         // a·b − c
      else if (distinct_elements(m) < distinct_elements(a)) m = negated(m, sum);  // c − a·b: the narrower factor
      else a = negated(a, sum);
    }
    uses[sum->operand(at)] = 0;
    sum->kind = OpKind::Fma;
    sum->attrs = Attrs{};
    sum->operands = {a, m, c};
  }
}

}  // namespace tilejit::ir
