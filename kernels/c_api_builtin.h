// The C ABI's built-in variants (tilejit_flex_variant → the Mask and ScoreMod of
// kernels/flex/variants_builtin.h), shared by the flex entry (c_api_flex.cpp) and the decode entry
// (c_api_decode.cpp) so that both convert, validate and cache them the same way. Not installed.
//
// One BuiltinVariant per combination of mods (ALiBi / soft-cap / documents): the traced kernels are cached
// per mod identity, so every call and every plan with that combination finds them again. The band (causal,
// window) is not part of the key: its sides are kernel arguments, set per call or per plan. ALiBi slopes are
// uploaded once per (backend, head count). The captures the variants read (slopes, cap, ids) are shared by
// every user of the combination, so whoever sets them holds the registry's mutex until its launch has read
// them.
#pragma once
#include <map>
#include <mutex>
#include <utility>

#include "kernels/flex/variants_builtin.h"
#include "tilejit/buffer.h"
#include "tilejit/c_api.h"

namespace tilejit::c_api_detail {

struct BuiltinRegistry {
  std::mutex mu;
  std::map<attention::flex::BuiltinSettings, attention::flex::BuiltinVariant> variants;  // keyed by mods only
  std::map<std::pair<Backend, int>, Buffer> slopes;  // (backend, heads_q) → f32 ALiBi slopes
};

/// The process's registry. Entries are never erased, so references into it stay valid.
BuiltinRegistry &builtin_registry();

/// The settings of a variant struct; throws TraceError for a soft-cap that is negative or not finite and for
/// window sides below −1.
attention::flex::BuiltinSettings builtin_settings(const tilejit_flex_variant &v);

/// The cached mods for this combination (call with reg.mu held). Only alibi / softcap / documents select it;
/// the caller sets the band (attention::flex::builtin_band(s)) on its own copy of the mask.
attention::flex::BuiltinVariant &builtin_variant(BuiltinRegistry &reg, const attention::flex::BuiltinSettings &s);

/// The ALiBi slopes of attention::alibi_slopes(heads) in a buffer on `be` (call with reg.mu held).
const Buffer &builtin_slopes(BuiltinRegistry &reg, Backend be, int heads);

}  // namespace tilejit::c_api_detail
