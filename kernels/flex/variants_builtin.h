// The built-in flex variants chosen by plain settings (causal, sliding window, ALiBi, soft-capping,
// document ids) assembled into one Mask and one ScoreMod. Shared by the CLI (tools/flex_flags.cpp) and
// the C ABI (kernels/c_api_flex.cpp) so both build exactly the same kernels. Not installed.
#pragma once
#include <compare>
#include <cstdint>
#include <optional>

#include "tilejit/capture.h"
#include "tilejit/flex_attention.h"

namespace tilejit::attention::flex {

/// Which built-in mods are on. Only what changes the traced kernel or the band is here; the values the
/// mods read (slopes, cap, ids) are captures in BuiltinVariant, set before each launch.
struct BuiltinSettings {
  bool causal = false;                          // key j visible from query i only when j ≤ i + off
  Align align = Align::TopLeft;                 // off of the causal mask and the window (see Band)
  int64_t window_left = -1, window_right = -1;  // sliding window sides; −1: unbounded
  bool alibi = false;                           // score − slope[h]·|i − j|
  bool learnable_slopes = false;                // with alibi: the slopes capture takes a gradient buffer
  bool softcap = false;                         // cap·tanh(score / cap)
  bool documents = false;                       // i32 document id per token, [batch, seqlen]
  auto operator<=>(const BuiltinSettings &) const = default;
};

/// The band the settings describe (causal clamps the window's right side to 0), or none.
std::optional<Band> builtin_band(const BuiltinSettings &s);

/// Throws TraceError (message starting with `who`) when a window side is negative but not −1.
void check_builtin_settings(const BuiltinSettings &s, const char *who);

/// The mods and the captures they read. Keep one object per settings to reuse its traced kernels
/// (kernels are cached per mod identity). Before each launch set the captures that are on:
/// slopes (f32 per query head, e.g. alibi_slopes; with learnable_slopes also its gradient buffer, set_grad),
/// cap (the f32 cap) and doc_ids (i32 per token).
struct BuiltinVariant {
  BuiltinSettings settings;
  Mask mask;
  ScoreMod score_mod;  // ALiBi first, then soft-capping
  Captured slopes, cap, doc_ids;  // empty when the setting is off
};

/// Builds the variant (validates like check_builtin_settings).
BuiltinVariant make_builtin_variant(const BuiltinSettings &s, const char *who);

}  // namespace tilejit::attention::flex
