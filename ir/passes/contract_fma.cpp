// contract_fma: an f32 product whose only use is an addition or a subtraction becomes one fused multiply-add, as
// CUDA C++ and Triton compile a·b + c by default:
//   a·b + c, c + a·b → fma(a, b, c)      c − a·b → fma(−a, b, c)      a·b − c → fma(a, b, −c)
// A negated operand replicated from fewer elements (a captured scalar, a row's or a column's value) is negated
// before its replication, once per element of its source; a full tile's negation costs nothing on the GPU, where
// ptxas takes it into the fma. A user's `score − slope·|q − kv|` then costs one instruction per score where it
// cost two. Numerics: the fma rounds once where the written order rounded the product and then the sum, so a
// result moves by at most the product's rounding error (half an ulp of a·b) before the sum's own rounding. Only
// with FloatRewrites::Fast, only for f32 (a bf16 or f16 expression rounds each step to its own type), and only
// where the product has no other use (else it would still be computed); mul_rn's products (tilejit/ops.h) are
// kept. The interpreter runs the rewritten IR too, so both backends agree.
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

bool is_f32(const Value *v) { return !v->type.is_ptr() && v->type.dtype() == DType::f32; }

/// −v, placed before `at`: the negation of the replicated source, replicated again, when v is replicated from
/// fewer elements; of v itself otherwise.
Value *negated(Builder &b, Value *v, SourceLoc loc) {
  if (auto c = passes::constant_of(v)) {
    Attrs a;
    a.fvalue = -c->f;
    return b.create1(OpKind::Constant, {}, v->type, a, loc);
  }
  const Value *source = nullptr;
  std::vector<const Op *> chain = passes::replication_chain(v, source);
  if (chain.empty() || source->type.numel() >= v->type.numel())
    return b.create1(OpKind::Neg, {v}, v->type, {}, loc);
  Value *r = b.create1(OpKind::Neg, {const_cast<Value *>(source)}, source->type, {}, loc);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    r = b.create1((*it)->kind, {r}, (*it)->result()->type, (*it)->attrs, loc);
  return r;
}

/// How many elements v's values come from: its replicated source's, or its own.
int64_t distinct_elements(const Value *v) {
  const Value *source = nullptr;
  passes::replication_chain(v, source);
  return source->type.numel();
}

}  // namespace

void contract_fma(Function &fn) {
  std::vector<Op *> sums;
  walk(*fn.body, [&](Op &op) {
    if ((op.kind == OpKind::Add || op.kind == OpKind::Sub) && is_f32(op.result())) sums.push_back(&op);
  });
  auto uses = use_counts(*fn.body);
  auto product = [&](const Value *v) -> const Op * {
    const Op *d = v->def;
    if (!d || d->kind != OpKind::Mul || d->attrs.flag || !is_f32(v) || uses[v] != 1) return nullptr;
    if (d->operand(0)->type.shape != v->type.shape || d->operand(1)->type.shape != v->type.shape) return nullptr;
    return d;
  };
  for (Op *sum : sums) {
    // The product to fuse: the left operand's, else (not for a − b·c's sign alone) the right one's.
    int at = product(sum->operand(0)) ? 0 : product(sum->operand(1)) ? 1 : -1;
    if (at < 0) continue;
    const Op *mul = sum->operand(at)->def;
    Value *a = mul->operand(0), *m = mul->operand(1), *c = sum->operand(1 - at);
    Builder b(sum->parent);
    b.set_insertion_point(sum->parent, passes::index_of(sum));
    if (sum->kind == OpKind::Sub) {
      if (at == 0) {
        c = negated(b, c, sum->loc);  // a·b − c
      } else if (distinct_elements(m) < distinct_elements(a)) {
        m = negated(b, m, sum->loc);  // c − a·b, the narrower factor negated
      } else {
        a = negated(b, a, sum->loc);
      }
    }
    uses[sum->operand(at)] = 0;
    sum->kind = OpKind::Fma;
    sum->operands = {a, m, c};
  }
}

}  // namespace tilejit::ir
