// The range analysis of ir/value_range.h: interval arithmetic over the tile IR, memoized per value (the IR is a
// DAG). Integer results that may leave their dtype's range (wrap around) are given the whole range.
#include "ir/value_range.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Interval kAll{-kInf, kInf};

Interval of_dtype(DType t) {
  switch (t) {
    case DType::i1: return {0, 1};
    case DType::i8: return {-128, 127};
    case DType::i16: return {-32768, 32767};
    case DType::i32: return {-2147483648.0, 2147483647.0};
    default: return kAll;  // i64 and floats: nothing known
  }
}

bool is_neg_inf_constant(const Value *v) {
  const Value *source = nullptr;
  passes::replication_chain(v, source);
  auto c = passes::constant_of(source);
  return c && c->is_float && c->f == -kInf;
}

// The products' hull; 0·inf counts as unbounded.
Interval mul(Interval a, Interval b) {
  double p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  for (double x : p)
    if (std::isnan(x)) return kAll;
  return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

// The endpoints' quotients' hull, for a divisor interval that excludes 0; inf/inf counts as unbounded.
Interval quotient(Interval a, Interval b) {
  double q[] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
  for (double x : q)
    if (std::isnan(x)) return kAll;
  return {*std::min_element(q, q + 4), *std::max_element(q, q + 4)};
}

class Analysis {
 public:
  explicit Analysis(const KnownRanges &known) : memo_(known) {}

  Interval of(const Value *v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    Interval r = compute(v);
    if (std::isnan(r.lo) || std::isnan(r.hi)) r = kAll;
    if (is_int(v->type.dtype()) && !v->type.is_ptr()) {
      const Interval whole = of_dtype(v->type.dtype());
      if (r.lo < whole.lo || r.hi > whole.hi) r = whole;  // may wrap around
    }
    memo_[v] = r;
    return r;
  }

 private:
  Interval compute(const Value *v) {
    const Op *op = v->def;
    const DType dt = v->type.dtype();
    if (!op) return of_dtype(dt);  // a kernel parameter or a loop-carried value
    using K = OpKind;
    auto arg = [&](int i) { return of(op->operand(i)); };
    switch (op->kind) {
      case K::Constant:
        if (is_int(dt)) return {double(op->attrs.ivalue), double(op->attrs.ivalue)};
        return {op->attrs.fvalue, op->attrs.fvalue};
      case K::ProgramId:
      case K::NumPrograms: return {0, 2147483647.0};
      case K::Arange: return {double(op->attrs.ints.at(0)), double(op->attrs.ints.at(1) - 1)};
      case K::Splat:
      case K::Broadcast:
      case K::ExpandDims:
      case K::Reshape:
      case K::Trans: return arg(0);
      case K::Cast: {
        Interval a = arg(0);
        if (dt == DType::f16 && std::max(std::fabs(a.lo), std::fabs(a.hi)) > 65504) return kAll;
        // Integer to integer keeps the range where it fits (the check in of() widens it otherwise); from a float,
        // truncation and wrap-around: only the dtype's range is known.
        if (is_int(dt)) return is_int(op->operand(0)->type.dtype()) ? a : of_dtype(dt);
        return a;
      }
      case K::Add: { Interval a = arg(0), b = arg(1); return {a.lo + b.lo, a.hi + b.hi}; }
      case K::Sub: { Interval a = arg(0), b = arg(1); return {a.lo - b.hi, a.hi - b.lo}; }
      case K::Mul: return mul(arg(0), arg(1));
      case K::Div: {
        // A divisor that excludes 0: the quotient lies between the endpoints' quotients (integer division
        // truncates toward 0, which stays between them too). Otherwise unbounded.
        Interval a = arg(0), b = arg(1);
        if (b.lo <= 0 && b.hi >= 0) return is_int(dt) ? of_dtype(dt) : kAll;
        return quotient(a, b);
      }
      case K::Fma: { Interval m = mul(arg(0), arg(1)), c = arg(2); return {m.lo + c.lo, m.hi + c.hi}; }
      case K::Neg: { Interval a = arg(0); return {-a.hi, -a.lo}; }
      case K::Abs: {
        Interval a = arg(0);
        double lo = a.lo <= 0 && a.hi >= 0 ? 0 : std::min(std::fabs(a.lo), std::fabs(a.hi));
        return {lo, std::max(std::fabs(a.lo), std::fabs(a.hi))};
      }
      case K::Minimum: { Interval a = arg(0), b = arg(1); return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)}; }
      case K::Maximum: { Interval a = arg(0), b = arg(1); return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)}; }
      case K::Tanh: return {-1, 1};
      case K::Sigmoid: return {0, 1};
      case K::Exp: { Interval a = arg(0); return {std::exp(a.lo), std::exp(a.hi)}; }
      case K::Exp2: { Interval a = arg(0); return {std::exp2(a.lo), std::exp2(a.hi)}; }
      case K::Sqrt: { Interval a = arg(0); return a.lo < 0 ? kAll : Interval{std::sqrt(a.lo), std::sqrt(a.hi)}; }
      case K::Cmp: return {0, 1};
      case K::Select: {
        // where(cond, a, b): a masked branch (−inf) adds nothing; the other branch's range stands.
        const Value *a = op->operand(1), *b = op->operand(2);
        if (is_neg_inf_constant(a)) return of(b);
        if (is_neg_inf_constant(b)) return of(a);
        Interval x = of(a), y = of(b);
        return {std::min(x.lo, y.lo), std::max(x.hi, y.hi)};
      }
      default:
        return is_int(dt) ? of_dtype(dt) : kAll;  // loads, logs, reductions, ...
    }
  }

  KnownRanges memo_;  // the given values first, then every value met
};

}  // namespace

Interval value_range(const Value *out, const KnownRanges &known) { return Analysis(known).of(out); }

}  // namespace tilejit::ir
