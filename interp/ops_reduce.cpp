// reduce (sum | max | min) and arg_reduce (max | min) along attrs.axis.
//
// Sums of f16/bf16/f32 accumulate in f32 (like the GPU), sequentially along the axis, and the result is
// rounded to the dtype; f64 sums accumulate in double; integer sums wrap. max/min propagate NaN.
// arg_reduce returns the i32 index of the first extreme element; a NaN counts as the extreme (the first
// NaN wins), consistent with max/min propagating it.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "interp/frame.h"
#include "interp/numerics.h"

namespace tilejit::interp {
namespace {

/// The reduced tile viewed as [outer, len, inner] with the reduced axis in the middle.
struct Dims {
  int64_t outer = 1, len = 1, inner = 1;
};

Dims split(Frame &fr, const Instr &in) {
  const ir::Type &t = fr.type(in.in[0]);
  const int64_t axis = in.op->attrs.axis;
  if (axis < 0 || axis >= t.rank())
    fr.fail(in, fmt::format("axis {} is out of range for {} (invalid IR)", axis, t.str()));
  Dims d;
  for (int64_t i = 0; i < t.rank(); ++i) {
    const int64_t s = t.shape[size_t(i)];
    if (i < axis) d.outer *= s;
    else if (i == axis) d.len = s;
    else d.inner *= s;
  }
  if (fr.type(in.out[0]).numel() != d.outer * d.inner)
    fr.fail(in, fmt::format("result type {} does not drop axis {} of {} (invalid IR)", fr.type(in.out[0]).str(),
                            axis, t.str()));
  return d;
}

/// Sequential reduction along the axis: acc = step(acc, x) for each x in axis order, one accumulator per
/// (outer, inner) position; the inner loop runs over contiguous memory.
template <class Acc, class T, class Step, class Fin>
void reduce_loop(const std::vector<T> &src, const Dims &d, Acc init, Step step, Fin fin, std::vector<T> &out) {
  out.resize(size_t(d.outer * d.inner));
  std::vector<Acc> acc(size_t(d.inner));
  for (int64_t o = 0; o < d.outer; ++o) {
    std::fill(acc.begin(), acc.end(), init);
    const T *base = src.data() + o * d.len * d.inner;
    for (int64_t j = 0; j < d.len; ++j)
      for (int64_t i = 0; i < d.inner; ++i) acc[size_t(i)] = step(acc[size_t(i)], base[j * d.inner + i]);
    for (int64_t i = 0; i < d.inner; ++i) out[size_t(o * d.inner + i)] = fin(acc[size_t(i)]);
  }
}

double nan_max(double a, double x) {
  if (std::isnan(a) || std::isnan(x)) return std::nan("");
  return x > a || (x == a && !std::signbit(x)) ? x : a;
}
double nan_min(double a, double x) {
  if (std::isnan(a) || std::isnan(x)) return std::nan("");
  return x < a || (x == a && std::signbit(x)) ? x : a;
}

void reduce_float(Frame &fr, const Instr &in, const Dims &d, DType t) {
  const auto &src = fr.at(in.in[0]).f;
  auto &out = fr.at(in.out[0]).f;
  const auto id = [](double x) { return x; };
  const double inf = std::numeric_limits<double>::infinity();
  switch (in.op->attrs.reduce) {
    case ir::ReduceKind::sum:
      if (t == DType::f64) reduce_loop<double>(src, d, 0.0, [](double a, double x) { return a + x; }, id, out);
      else reduce_loop<float>(src, d, 0.0f, [](float a, double x) { return a + float(x); },
                              [t](float a) { return round_float(a, t); }, out);
      return;
    case ir::ReduceKind::max: return reduce_loop<double>(src, d, -inf, nan_max, id, out);
    case ir::ReduceKind::min: return reduce_loop<double>(src, d, inf, nan_min, id, out);
  }
}

void reduce_int(Frame &fr, const Instr &in, const Dims &d, DType t) {
  const auto &src = fr.at(in.in[0]).i;
  auto &out = fr.at(in.out[0]).i;
  const auto id = [](int64_t x) { return x; };
  switch (in.op->attrs.reduce) {
    case ir::ReduceKind::sum:
      return reduce_loop<int64_t>(src, d, int64_t(0), [](int64_t a, int64_t x) { return int64_t(uint64_t(a) + uint64_t(x)); },
                                  [t](int64_t a) { return wrap_int(a, t); }, out);
    case ir::ReduceKind::max:
      return reduce_loop<int64_t>(src, d, std::numeric_limits<int64_t>::min(),
                                  [](int64_t a, int64_t x) { return x > a ? x : a; }, id, out);
    case ir::ReduceKind::min:
      return reduce_loop<int64_t>(src, d, std::numeric_limits<int64_t>::max(),
                                  [](int64_t a, int64_t x) { return x < a ? x : a; }, id, out);
  }
}

/// Index of the first extreme along the axis; `better(x, best)` says x strictly beats the current best.
template <class T, class Better>
void arg_loop(const std::vector<T> &src, const Dims &d, Better better, std::vector<int64_t> &out) {
  out.resize(size_t(d.outer * d.inner));
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      const T *p = src.data() + o * d.len * d.inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < d.len; ++j)
        if (better(p[j * d.inner], p[best * d.inner])) best = j;
      out[size_t(o * d.inner + i)] = best;
    }
}

void exec_arg_reduce(Frame &fr, const Instr &in, const Dims &d) {
  const ir::Type &t = fr.type(in.in[0]);
  auto &out = fr.at(in.out[0]).i;
  const bool is_max = in.op->attrs.reduce == ir::ReduceKind::max;
  if (in.op->attrs.reduce == ir::ReduceKind::sum) fr.fail(in, "arg_reduce needs max or min, not sum (invalid IR)");
  if (stores_float(t)) {
    const auto &src = fr.at(in.in[0]).f;
    if (is_max)
      arg_loop(src, d, [](double x, double b) { return !std::isnan(b) && (std::isnan(x) || x > b); }, out);
    else
      arg_loop(src, d, [](double x, double b) { return !std::isnan(b) && (std::isnan(x) || x < b); }, out);
  } else {
    const auto &src = fr.at(in.in[0]).i;
    if (is_max) arg_loop(src, d, [](int64_t x, int64_t b) { return x > b; }, out);
    else arg_loop(src, d, [](int64_t x, int64_t b) { return x < b; }, out);
  }
  const DType rt = fr.type(in.out[0]).dtype();
  for (auto &v : out) v = wrap_int(v, rt);
}

}  // namespace

void exec_reduce(Frame &fr, const Instr &in) {
  const Dims d = split(fr, in);
  if (in.kind == ir::OpKind::ArgReduce) return exec_arg_reduce(fr, in, d);
  const ir::Type &t = fr.type(in.in[0]);
  if (stores_float(t)) reduce_float(fr, in, d, t.dtype());
  else reduce_int(fr, in, d, t.dtype());
}

}  // namespace tilejit::interp
