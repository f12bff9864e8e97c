// Elementwise ops: arithmetic, bitwise, compare, unary math, fma, select, cast, ptr_add.
//
// Float values are computed in double and rounded to the result dtype after every op (for + - * / sqrt
// this equals the correctly rounded f32/f16/bf16 result). Transcendentals on f16/bf16 are rounded to f32
// first, then to the 16-bit format, as the GPU evaluates them in f32. Integers are computed on 64 bits
// (unsigned arithmetic, so overflow is defined) and wrapped to their width.
//
// Choices where C/LLVM leave behaviour undefined (documented so the GPU path can match or be compared):
//  - minimum/maximum on floats propagate NaN; maximum(-0, +0) = +0, minimum(-0, +0) = -0;
//  - shl by an amount outside [0, bits) gives 0; shr by such an amount gives the sign fill (0 or -1);
//  - integer div/rem by zero throws InterpError; INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0;
//  - cast float→int truncates toward zero, NaN → 0, out-of-range values clamp to the dtype's min/max;
//    cast to i1 is `x != 0`; cast int→int wraps (i1 sources are 0/1, zero-extended).
// Operands are normally of the result's shape; a one-element operand is broadcast (cheap, and it keeps
// hand-built test IR short).
#include <fmt/format.h>

#include <cmath>

#include "interp/frame.h"
#include "interp/numerics.h"

namespace tilejit::interp {
namespace {

using K = ir::OpKind;

/// Operand data with stride 0 for a broadcast one-element operand.
template <class T> struct Src {
  const T *p;
  int64_t stride;
  T operator[](int64_t k) const { return p[k * stride]; }
};

struct Ctx {
  Frame &fr;
  const Instr &in;
  int64_t n;  // elements of the result

  const ir::Type &type(int operand) const { return fr.type(in.in[size_t(operand)]); }
  void check_shape(int operand) const {
    const int64_t m = type(operand).numel();
    if (m != n && m != 1)
      fr.fail(in, fmt::format("operand {} has type {} but the result has {} elements (invalid IR)", operand,
                              type(operand).str(), n));
  }
  Src<double> f(int operand) const {
    check_shape(operand);
    const Tile &t = fr.at(in.in[size_t(operand)]);
    return {t.f.data(), t.f.size() == 1 ? 0 : 1};
  }
  Src<int64_t> i(int operand) const {
    check_shape(operand);
    const Tile &t = fr.at(in.in[size_t(operand)]);
    return {t.i.data(), t.i.size() == 1 ? 0 : 1};
  }
  /// Provenance of a pointer operand (stride 0 when one entry covers every element).
  Src<int32_t> prov(int operand) const {
    static const int32_t none = kNoProvenance;
    const Tile &t = fr.at(in.in[size_t(operand)]);
    if (t.prov.empty()) return {&none, 0};
    return {t.prov.data(), t.prov.size() == 1 ? 0 : 1};
  }
  /// The result's provenance = operand's (a pointer that moved or changed pointee stays in its argument).
  void copy_prov(int operand) const {
    const Tile &t = fr.at(in.in[size_t(operand)]);
    auto &o = fr.at(in.out[0]).prov;
    if (t.prov.empty()) o.assign(1, kNoProvenance);
    else o.assign(t.prov.begin(), t.prov.end());
  }
  std::vector<double> &out_f() const {
    auto &v = fr.at(in.out[0]).f;
    v.resize(size_t(n));
    return v;
  }
  std::vector<int64_t> &out_i() const {
    auto &v = fr.at(in.out[0]).i;
    v.resize(size_t(n));
    return v;
  }
};

void round_all(std::vector<double> &v, DType t) {
  switch (t) {
    case DType::f32: for (double &x : v) x = round_to_f32(x); break;
    case DType::bf16: for (double &x : v) x = round_to_bf16(x); break;
    case DType::f16: for (double &x : v) x = round_to_f16(x); break;
    default: break;
  }
}
/// Rounding after a transcendental: through f32 for the 16-bit formats (the GPU computes them in f32).
void round_math(std::vector<double> &v, DType t) {
  if (t == DType::f16 || t == DType::bf16)
    for (double &x : v) x = round_to_f32(x);
  round_all(v, t);
}
void wrap_all(std::vector<int64_t> &v, DType t) {
  if (t == DType::i64) return;
  for (int64_t &x : v) x = wrap_int(x, t);
}

double fmaximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
double fminimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <class F> void map_f2(const Ctx &c, DType t, F f) {
  auto a = c.f(0), b = c.f(1);
  auto &o = c.out_f();
  for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = f(a[k], b[k]);
  round_all(o, t);
}
template <class F> void map_i2(const Ctx &c, DType t, F f) {
  auto a = c.i(0), b = c.i(1);
  auto &o = c.out_i();
  for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = f(a[k], b[k]);
  wrap_all(o, t);
}
template <class F> void map_f1(const Ctx &c, F f) {
  auto a = c.f(0);
  auto &o = c.out_f();
  for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = f(a[k]);
}

int64_t wadd(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wsub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wmul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

void binary_float(const Ctx &c, DType t) {
  switch (c.in.kind) {
    case K::Add: return map_f2(c, t, [](double a, double b) { return a + b; });
    case K::Sub: return map_f2(c, t, [](double a, double b) { return a - b; });
    case K::Mul: return map_f2(c, t, [](double a, double b) { return a * b; });
    case K::Div: return map_f2(c, t, [](double a, double b) { return a / b; });
    case K::Rem: return map_f2(c, t, [](double a, double b) { return std::fmod(a, b); });
    case K::Minimum: return map_f2(c, t, fminimum);
    case K::Maximum: return map_f2(c, t, fmaximum);
    default:
      c.fr.fail(c.in, fmt::format("is not defined on float operands of type {}", c.type(0).str()));
  }
}

void div_rem_int(const Ctx &c, DType t, bool rem) {
  auto a = c.i(0), b = c.i(1);
  auto &o = c.out_i();
  for (int64_t k = 0; k < c.n; ++k) {
    const int64_t x = a[k], y = b[k];
    if (y == 0)
      c.fr.fail(c.in, fmt::format("integer {} by zero at element {} of the {} tile ({} {} 0)",
                                  rem ? "remainder" : "division", element_index_str(c.type(0).shape, k),
                                  ir::shape_str(c.type(0).shape), x, rem ? "%" : "/"));
    if (y == -1) o[size_t(k)] = rem ? 0 : wsub(0, x);  // avoids INT64_MIN / -1 overflow
    else o[size_t(k)] = rem ? x % y : x / y;
  }
  wrap_all(o, t);
}

void binary_int(const Ctx &c, DType t) {
  const int bits = dtype_bits(t);
  switch (c.in.kind) {
    case K::Add: return map_i2(c, t, wadd);
    case K::Sub: return map_i2(c, t, wsub);
    case K::Mul: return map_i2(c, t, wmul);
    case K::Div: return div_rem_int(c, t, false);
    case K::Rem: return div_rem_int(c, t, true);
    case K::Minimum: return map_i2(c, t, [](int64_t a, int64_t b) { return a < b ? a : b; });
    case K::Maximum: return map_i2(c, t, [](int64_t a, int64_t b) { return a > b ? a : b; });
    case K::And: return map_i2(c, t, [](int64_t a, int64_t b) { return a & b; });
    case K::Or: return map_i2(c, t, [](int64_t a, int64_t b) { return a | b; });
    case K::Xor: return map_i2(c, t, [](int64_t a, int64_t b) { return a ^ b; });
    case K::Shl:
      return map_i2(c, t, [bits](int64_t a, int64_t s) {
        return s < 0 || s >= bits ? int64_t(0) : int64_t(uint64_t(a) << s);
      });
    case K::Shr:
      return map_i2(c, t, [bits](int64_t a, int64_t s) {
        return s < 0 || s >= bits ? (a < 0 ? int64_t(-1) : int64_t(0)) : a >> s;
      });
    default:
      c.fr.fail(c.in, fmt::format("is not defined on integer operands of type {}", c.type(0).str()));
  }
}

template <class T> bool compare(ir::CmpPred p, T a, T b) {
  switch (p) {
    case ir::CmpPred::eq: return a == b;
    case ir::CmpPred::ne: return a != b;
    case ir::CmpPred::lt: return a < b;
    case ir::CmpPred::le: return a <= b;
    case ir::CmpPred::gt: return a > b;
    case ir::CmpPred::ge: return a >= b;
  }
  return false;
}

template <class T, class Get> void cmp_loop(const Ctx &c, Get get) {
  auto a = get(0), b = get(1);
  auto &o = c.out_i();
  const ir::CmpPred p = c.in.op->attrs.pred;
  for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = compare<T>(p, T(a[k]), T(b[k])) ? 1 : 0;
}

void exec_cmp(const Ctx &c) {
  const ir::Type &t = c.type(0);
  if (t.is_ptr()) return cmp_loop<uint64_t>(c, [&](int i) { return c.i(i); });
  if (is_float(t.dtype())) return cmp_loop<double>(c, [&](int i) { return c.f(i); });
  return cmp_loop<int64_t>(c, [&](int i) { return c.i(i); });
}

void unary_float(const Ctx &c, DType t) {
  switch (c.in.kind) {
    case K::Neg: map_f1(c, [](double x) { return -x; }); return;
    case K::Abs: map_f1(c, [](double x) { return std::fabs(x); }); return;
    case K::Sqrt: map_f1(c, [](double x) { return std::sqrt(x); }); round_all(c.out_f(), t); return;
    case K::Exp: map_f1(c, [](double x) { return std::exp(x); }); break;
    case K::Exp2: map_f1(c, [](double x) { return std::exp2(x); }); break;
    case K::Log: map_f1(c, [](double x) { return std::log(x); }); break;
    case K::Log2: map_f1(c, [](double x) { return std::log2(x); }); break;
    case K::Rsqrt: map_f1(c, [](double x) { return 1.0 / std::sqrt(x); }); break;
    case K::Tanh: map_f1(c, [](double x) { return std::tanh(x); }); break;
    case K::Sigmoid: map_f1(c, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }); break;
    default:
      c.fr.fail(c.in, fmt::format("is not defined on a float operand of type {}", c.type(0).str()));
  }
  round_math(c.out_f(), t);
}

void unary_int(const Ctx &c, DType t) {
  auto a = c.i(0);
  auto &o = c.out_i();
  switch (c.in.kind) {
    case K::Neg: for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = wsub(0, a[k]); break;
    case K::Abs: for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = a[k] < 0 ? wsub(0, a[k]) : a[k]; break;
    case K::Not: for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = ~a[k]; break;
    default:
      c.fr.fail(c.in, fmt::format("is not defined on an integer operand of type {}", c.type(0).str()));
  }
  wrap_all(o, t);  // for i1, ~x & 1 is the logical not
}

void exec_fma(const Ctx &c, DType t) {
  auto a = c.f(0), b = c.f(1), d = c.f(2);
  auto &o = c.out_f();
  if (t == DType::f32) {  // fused in f32: one rounding of the exact a*b+c
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = std::fma(float(a[k]), float(b[k]), float(d[k]));
  } else {
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = std::fma(a[k], b[k], d[k]);
    round_all(o, t);
  }
}

void exec_select(const Ctx &c) {
  auto cond = c.i(0);
  if (stores_float(c.fr.type(c.in.out[0]))) {
    auto a = c.f(1), b = c.f(2);
    auto &o = c.out_f();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = cond[k] ? a[k] : b[k];
  } else {
    auto a = c.i(1), b = c.i(2);
    auto &o = c.out_i();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = cond[k] ? a[k] : b[k];
    if (c.fr.type(c.in.out[0]).is_ptr()) {  // each lane keeps the provenance of the pointer it picked
      auto pa = c.prov(1), pb = c.prov(2);
      auto &op = c.fr.at(c.in.out[0]).prov;
      if (pa.stride == 0 && pb.stride == 0 && pa[0] == pb[0]) {
        op.assign(1, pa[0]);
      } else {
        op.resize(size_t(c.n));
        for (int64_t k = 0; k < c.n; ++k) op[size_t(k)] = cond[k] ? pa[k] : pb[k];
      }
    }
  }
}

void exec_cast(const Ctx &c) {
  const ir::Type &st = c.type(0), &rt = c.fr.type(c.in.out[0]);
  const bool sf = stores_float(st), rf = stores_float(rt);
  const DType sd = st.dtype(), rd = rt.dtype();
  if (sf && rf) {
    auto a = c.f(0);
    auto &o = c.out_f();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = a[k];
    round_all(o, rd);
  } else if (sf) {
    auto a = c.f(0);
    auto &o = c.out_i();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = float_to_int(a[k], rd);
  } else if (rf) {
    auto a = c.i(0);
    auto &o = c.out_f();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = int_to_float(a[k], rd);
  } else if (rt.is_ptr() || st.is_ptr()) {  // pointer ↔ i64 (or pointee change): the address unchanged
    auto a = c.i(0);
    auto &o = c.out_i();
    for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = a[k];
    if (!rt.is_ptr()) wrap_all(o, rd);
    else if (st.is_ptr()) c.copy_prov(0);  // pointee change: same argument
    else c.fr.at(c.in.out[0]).prov.assign(1, kNoProvenance);  // an integer turned address: checked against all
  } else {
    auto a = c.i(0);
    auto &o = c.out_i();
    if (rd == DType::i1)
      for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = a[k] != 0;
    else
      for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = wrap_int(a[k], rd);
    (void)sd;  // i1 sources already hold 0/1, so sign extension is zero extension
  }
}

void exec_ptr_add(const Ctx &c) {
  const int64_t elem = dtype_bytes(c.type(0).dtype());
  auto p = c.i(0), off = c.i(1);
  auto &o = c.out_i();
  for (int64_t k = 0; k < c.n; ++k) o[size_t(k)] = wadd(p[k], wmul(off[k], elem));
  c.copy_prov(0);
}

}  // namespace

void exec_elementwise(Frame &fr, const Instr &in) {
  const ir::Type &rt = fr.type(in.out.at(0));
  const Ctx c{fr, in, rt.numel()};
  switch (in.kind) {
    case K::Cmp: return exec_cmp(c);
    case K::Select: return exec_select(c);
    case K::Cast: return exec_cast(c);
    case K::PtrAdd: return exec_ptr_add(c);
    case K::Fma: return exec_fma(c, rt.dtype());
    default: break;
  }
  const ir::Type &t0 = c.type(0);
  const bool is_f = stores_float(t0);
  if (in.in.size() == 2) return is_f ? binary_float(c, rt.dtype()) : binary_int(c, rt.dtype());
  if (in.in.size() == 1) return is_f ? unary_float(c, rt.dtype()) : unary_int(c, rt.dtype());
  fr.fail(in, fmt::format("has {} operands, which the interpreter does not support", in.in.size()));
}

}  // namespace tilejit::interp
