#include "kernels/paged/decode_combine.h"

#include <limits>
#include <map>
#include <mutex>

#include "kernels/flex/flex_internal.h"
#include "tilejit/ops.h"

namespace tilejit::attention::paged {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

void trace_combine(DType dt, std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const int DV = C(cDimV), PV = C(cPadV), BR = C(cBlockR);
  const bool large = C(cLarge);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto wide = [&](const Tile &t) { return large ? t.to(DType::i64) : t; };
  auto stride = [&](int i) { return large ? P(i) : P(i).to(DType::i32); };

  Tile r = program_id(0) * BR + arange(0, BR);
  Tile row_ok = r < P(cRows);
  Tile d = arange(0, PV);
  Tile o_mask = row_ok(_, None);
  if (DV != PV) o_mask = o_mask & (d < DV)(None, _);
  Tile o_rows = (wide(r) * DV)(_, None) + d(None, _);
  auto lse_of = [&](const Tile &s) {
    return load(P(cLsePart) + wide(s) * stride(cPartStrideL) + r, row_ok, neg_inf);
  };

  // The largest split lse per row: the frame every split's weight is taken in (0 where no split saw a key).
  Tile m = full({BR}, neg_inf, DType::f32);
  for_range(0, P(cNumSplits), 1, [&](I32 s) { m = maximum(m, lse_of(s)); });
  Tile m_safe = where(m == neg_inf, 0.f, m);
  Tile acc = zeros({BR, PV}, DType::f32), w_sum = zeros({BR}, DType::f32);
  for_range(0, P(cNumSplits), 1, [&](I32 s) {
    Tile w = exp2((lse_of(s) - m_safe) * kLog2e);  // 0 for a split without keys (lse −inf)
    Tile o = load(P(cOPart) + wide(s) * stride(cPartStrideO) + o_rows, o_mask, 0.f);
    acc = acc + o * w(_, None);
    w_sum = w_sum + w;
  });
  Tile none = w_sum == 0.f;
  Tile out = acc * (1.f / where(none, 1.f, w_sum))(_, None);
  store(P(cO) + o_rows, out.to(dt), o_mask);
  store(P(cLse) + r, where(none, neg_inf, m_safe + log2(where(none, 1.f, w_sum)) * kLn2), row_ok);
}

}  // namespace

std::shared_ptr<KernelBase> combine_kernel(DType dt) {
  static std::mutex mu;
  static std::map<DType, std::shared_ptr<KernelBase>> kernels;
  std::lock_guard<std::mutex> lock(mu);
  auto &k = kernels[dt];
  if (!k) {
    using K = detail::ParamKind;
    flex::ParamTable t;
    t.add("O_PART", K::Ptr, DType::f32);
    t.add("LSE_PART", K::Ptr, DType::f32);
    t.add("O", K::Ptr, dt);
    t.add("LSE", K::Ptr, DType::f32);
    t.add("num_splits", K::I32, DType::i32, false);
    for (const char *n : {"part_stride_o", "part_stride_l"}) t.add(n, K::I64, DType::i64, false);
    t.add("rows", K::I32, DType::i32, false);
    for (const char *n : {"DIM_V", "PAD_V", "BLOCK_R"}) t.add(n, K::ConstInt);
    t.add("LARGE", K::ConstBool, DType::i1);
    k = std::make_shared<KernelBase>("decode_combine", std::move(t.decls), std::move(t.names),
                                     [dt](std::span<const detail::ArgValue> a) { trace_combine(dt, a); });
  }
  return k;
}

}  // namespace tilejit::attention::paged
