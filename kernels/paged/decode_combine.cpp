#include "kernels/paged/decode_combine.h"

#include <limits>
#include <map>
#include <mutex>

#include "kernels/flex/flex_internal.h"
#include "tilejit/ops.h"
#include "kernels/log2_units.h"

namespace tilejit::attention::paged {
namespace {

using kernels::kLog2e;
using kernels::kLn2;

void trace_combine(DType dt, std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const int DV = C(cDimV), PV = C(cPadV), NS = C(cSplitsPad);
  const bool large = C(cLarge);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto wide = [&](const Tile &t) { return large ? t.to(DType::i64) : t; };
  auto stride = [&](int i) { return flex::offset_param(i, large); };

  // One row per program, every split at once: the loads are independent (no chain of one per split).
  Tile r = wide(program_id(0));
  Tile s = arange(0, NS), d = arange(0, PV);
  Tile s_ok = s < P(cNumSplits);
  Tile d_ok = d < DV;
  Tile lse = load(P(cLsePart) + wide(s) * stride(cPartStrideL) + r, s_ok, neg_inf);  // [splits]
  // The largest split lse: the frame every split's weight is taken in (0 where no split saw a key).
  Tile m = max(lse, 0);
  Tile m_safe = where(m == neg_inf, 0.f, m);
  Tile w = exp2((lse - m_safe) * kLog2e);  // 0 for a split without keys (lse −inf)
  Tile o_mask = s_ok(_, None);
  if (DV != PV) o_mask = o_mask & d_ok(None, _);
  Tile o = load(P(cOPart) + (wide(s) * stride(cPartStrideO))(_, None) + (r * DV + d)(None, _), o_mask, 0.f);
  Tile acc = sum(o * w(_, None), 0);  // [PV]
  Tile w_sum = sum(w, 0);
  Tile none = w_sum == 0.f;
  Tile out = acc * (1.f / where(none, 1.f, w_sum));
  store(P(cO) + r * DV + d, out.to(dt), DV != PV ? d_ok : Tile());
  store(P(cLse) + r, where(none, neg_inf, m_safe + log2(where(none, 1.f, w_sum)) * kLn2));
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
    for (const char *n : {"DIM_V", "PAD_V", "SPLITS_PAD"}) t.add(n, K::ConstInt);
    t.add("LARGE", K::ConstBool, DType::i1);
    k = std::make_shared<KernelBase>("decode_combine", std::move(t.decls), std::move(t.names),
                                     [dt](std::span<const detail::ArgValue> a) { trace_combine(dt, a); });
  }
  return k;
}

}  // namespace tilejit::attention::paged
