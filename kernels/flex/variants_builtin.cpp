// Built-in variants from plain settings: one place that turns causal/window/ALiBi/soft-cap/document flags
// into a Mask and a ScoreMod, for the CLI and the C ABI.
#include "kernels/flex/variants_builtin.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "tilejit/error.h"
#include "tilejit/flex_variants.h"

namespace tilejit::attention::flex {

std::optional<Band> builtin_band(const BuiltinSettings &s) {
  const bool window = s.window_left >= 0 || s.window_right >= 0;
  if (!s.causal && !window) return std::nullopt;
  Band band{-1, -1, s.align};
  if (s.causal) band.right = 0;
  band.left = bounded_side(s.window_left);
  // A causal window never reaches past the diagonal, whatever its right side says.
  if (s.window_right >= 0) band.right = s.causal ? std::min<int64_t>(0, s.window_right) : bounded_side(s.window_right);
  return band;
}

void check_builtin_settings(const BuiltinSettings &s, const char *who) {
  if (s.window_left < -1 || s.window_right < -1)
    throw TraceError(fmt::format("{}: sliding window sides must be ≥ 0, or −1 for unbounded (got left {}, right {})",
                                 who, s.window_left, s.window_right));
}

BuiltinVariant make_builtin_variant(const BuiltinSettings &s, const char *who) {
  check_builtin_settings(s, who);
  BuiltinVariant v;
  v.settings = s;
  if (auto band = builtin_band(s)) v.mask = Mask(*band);
  // Placeholder values: the caller sets the real ones before each launch (they are kernel arguments).
  if (s.documents) {
    v.doc_ids = capture(DevicePtr{}, DType::i32);
    v.mask = and_masks(v.mask, document_mask(v.doc_ids));
  }
  if (s.alibi) {
    v.slopes = s.learnable_slopes ? capture(DevicePtr{}, DType::f32, DevicePtr{}) : capture(DevicePtr{}, DType::f32);
    v.score_mod = alibi(v.slopes);
  }
  if (s.softcap) {
    v.cap = capture(1.f);
    v.score_mod = compose(v.score_mod, softcap(v.cap));
  }
  return v;
}

}  // namespace tilejit::attention::flex
