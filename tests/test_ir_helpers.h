// Small helpers for building tile IR by hand in the ir/ tests (the DSL is not used here on purpose: the
// tests must be able to build IR the DSL would refuse).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/ir.h"
#include "ir/numerics.h"

namespace tilejit::ir::testing {

inline Type T(std::vector<int64_t> shape, DType d) { return Type{std::move(shape), ElemType{d, false}}; }
inline Type S(DType d) { return Type{{}, ElemType{d, false}}; }
inline Type P(std::vector<int64_t> shape, DType d) { return Type{std::move(shape), ElemType{d, true}}; }

/// A function under construction with a builder appending to its body.
struct FnBuilder {
  Function fn;
  Builder b{fn.body.get()};

  explicit FnBuilder(std::string name = "k") { fn.name = std::move(name); }

  Value *param(std::string name, Type t, bool align16 = false, bool div16 = false) {
    fn.params.push_back(ParamInfo{name, t, align16, div16});
    Value *v = fn.body->add_arg(t);
    v->name = name;
    return v;
  }
  Value *op(OpKind k, std::vector<Value *> operands, Type t, Attrs a = {}, SourceLoc loc = {}) {
    return b.create1(k, std::move(operands), std::move(t), std::move(a), loc);
  }
  /// A float constant, rounded to its dtype as the DSL makes them (the verifier requires it).
  Value *cf(Type t, double v) {
    Attrs a;
    a.fvalue = std::isnan(v) ? v : numerics::round_float(v, t.dtype());
    return op(OpKind::Constant, {}, std::move(t), a);
  }
  Value *ci(Type t, int64_t v) { Attrs a; a.ivalue = v; return op(OpKind::Constant, {}, std::move(t), a); }
  Value *axis_op(OpKind k, Value *x, Type t, int64_t axis) { Attrs a; a.axis = axis; return op(k, {x}, std::move(t), a); }
  Value *cmp(CmpPred p, Value *x, Value *y) {
    Attrs a; a.pred = p;
    return op(OpKind::Cmp, {x, y}, Type{x->type.shape, {DType::i1}}, a);
  }
  Value *arange(int64_t start, int64_t end) {
    Attrs a; a.ints = {start, end};
    return op(OpKind::Arange, {}, T({end - start}, DType::i32), a);
  }
  Value *program_id(int axis = 0) { Attrs a; a.axis = axis; return op(OpKind::ProgramId, {}, S(DType::i32), a); }
  void yield(std::vector<Value *> vs) { b.create(OpKind::Yield, std::move(vs), {}); }

  /// Creates a for op carrying `inits`; the builder is moved into its body (args: iv, carried...).
  Op *begin_for(Value *lb, Value *ub, Value *step, std::vector<Value *> inits) {
    std::vector<Value *> operands{lb, ub, step};
    std::vector<Type> types;
    for (auto *v : inits) { operands.push_back(v); types.push_back(v->type); }
    Op *f = b.create(OpKind::For, operands, types);
    Block *body = f->region(0);
    body->add_arg(lb->type);
    for (auto *v : inits) body->add_arg(v->type);
    saved_.push_back({b.block(), b.position()});
    b.set_insertion_point_to_end(body);
    return f;
  }
  Op *begin_if(Value *cond, std::vector<Type> result_types) {
    Op *i = b.create(OpKind::If, {cond}, std::move(result_types));
    saved_.push_back({b.block(), b.position()});
    b.set_insertion_point_to_end(i->region(0));
    return i;
  }
  void else_of(Op *if_op) { b.set_insertion_point_to_end(if_op->region(1)); }
  /// Returns the builder to just after the innermost for/if begun.
  void end() {
    b.set_insertion_point(saved_.back().first, saved_.back().second);
    saved_.pop_back();
  }

 private:
  std::vector<std::pair<Block *, size_t>> saved_;
};

}  // namespace tilejit::ir::testing
