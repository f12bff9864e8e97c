// The C ABI's built-in variant registry (c_api_builtin.h).
#include "kernels/c_api_builtin.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "tilejit/error.h"
#include "tilejit/flex_variants.h"

namespace tilejit::c_api_detail {

using attention::flex::BuiltinSettings;
using attention::flex::BuiltinVariant;

BuiltinRegistry &builtin_registry() {
  static BuiltinRegistry reg;
  return reg;
}

BuiltinSettings builtin_settings(const tilejit_flex_variant &v) {
  if (!(std::isfinite(v.softcap) && v.softcap >= 0))
    throw TraceError(fmt::format("softcap {} must be a finite value ≥ 0 (0: off)", v.softcap));
  BuiltinSettings s{.causal = v.causal != 0,
                    .align = v.bottom_right ? attention::Align::BottomRight : attention::Align::TopLeft,
                    .window_left = v.window_left,
                    .window_right = v.window_right,
                    .alibi = v.alibi != 0,
                    .softcap = v.softcap > 0,
                    .documents = v.doc_ids != nullptr};
  attention::flex::check_builtin_settings(s, "window");
  return s;
}

BuiltinVariant &builtin_variant(BuiltinRegistry &reg, const BuiltinSettings &s) {
  BuiltinSettings key{.alibi = s.alibi, .softcap = s.softcap, .documents = s.documents};
  auto it = reg.variants.find(key);
  if (it == reg.variants.end())
    it = reg.variants.emplace(key, attention::flex::make_builtin_variant(key, "tilejit_flex_variant")).first;
  return it->second;
}

const Buffer &builtin_slopes(BuiltinRegistry &reg, Backend be, int heads) {
  auto key = std::make_pair(be, heads);
  auto it = reg.slopes.find(key);
  if (it != reg.slopes.end()) return it->second;
  std::vector<float> host = attention::alibi_slopes(heads);
  Buffer b(host.size() * 4, be);
  b.upload(host);
  return reg.slopes.emplace(key, std::move(b)).first->second;
}

}  // namespace tilejit::c_api_detail
