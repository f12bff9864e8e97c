// Built-in variants: masks (bands and mask functions), score mods, and their composition.
#include "tilejit/flex_variants.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention {

Mask causal(Align align) { return Mask(Band{-1, 0, align}); }

Mask sliding_window(int64_t left, int64_t right, Align align) { return Mask(Band{left, right, align}); }

Mask document_mask(const Captured &doc_ids) {
  return Mask([doc_ids](Tile, Tile, Tile q, Tile kv) {
    Tile ids = doc_ids();
    return load(ids + mod_q_token(q)) == load(ids + mod_k_token(kv));
  });
}

Mask prefix_lm(const Captured &prefix_len, bool per_batch) {
  return Mask([prefix_len, per_batch](Tile b, Tile, Tile q, Tile kv) {
    Tile prefix = per_batch ? load(prefix_len() + b) : prefix_len();
    return (kv <= q) | (kv < prefix);
  });
}

MaskFn band_function(const Band &band) {
  return MaskFn([band](Tile, Tile, Tile q, Tile kv) {
    Tile diag = q;
    if (band.align == Align::BottomRight) diag = q + (mod_seqlen_k() - mod_seqlen_q());
    Tile ok = kv == kv;  // all true, broadcast shape of q and kv follows below
    if (band.left >= 0) ok = ok & (kv >= diag - flex::bounded_side(band.left));
    if (band.right >= 0) ok = ok & (kv <= diag + flex::bounded_side(band.right));
    return ok & (diag == diag);
  });
}

namespace {

/// The whole mask as one function (band folded in), or empty for full attention.
MaskFn as_function(const Mask &m) {
  if (!m.band) return m.fn;
  MaskFn band = band_function(*m.band);
  if (!m.fn) return band;
  MaskFn fn = m.fn;
  return MaskFn([band, fn](Tile b, Tile h, Tile q, Tile kv) { return band(b, h, q, kv) & fn(b, h, q, kv); });
}

int64_t tighter(int64_t a, int64_t b) {  // negative = unbounded
  if (a < 0) return b;
  if (b < 0) return a;
  return std::min(a, b);
}
int64_t looser(int64_t a, int64_t b) { return (a < 0 || b < 0) ? -1 : std::max(a, b); }

}  // namespace

Mask and_masks(const Mask &a, const Mask &b) {
  Mask r;
  MaskFn extra_a = a.fn, extra_b = b.fn;
  if (a.band && b.band && a.band->align == b.band->align) {
    r.band = Band{tighter(a.band->left, b.band->left), tighter(a.band->right, b.band->right), a.band->align};
  } else if (a.band && b.band) {
    r.band = a.band;                     // keep one band in closed form,
    extra_b = as_function(b);            // test the other one inside the function
  } else {
    r.band = a.band ? a.band : b.band;
  }
  if (extra_a && extra_b)
    r.fn = MaskFn([extra_a, extra_b](Tile bb, Tile h, Tile q, Tile kv) {
      return extra_a(bb, h, q, kv) & extra_b(bb, h, q, kv);
    });
  else
    r.fn = extra_a ? extra_a : extra_b;
  return r;
}

Mask or_masks(const Mask &a, const Mask &b) {
  MaskFn fa = as_function(a), fb = as_function(b);
  if (!fa || !fb) return Mask();  // one side sees everything
  Mask r(MaskFn([fa, fb](Tile bb, Tile h, Tile q, Tile kv) { return fa(bb, h, q, kv) | fb(bb, h, q, kv); }));
  if (a.band && b.band && a.band->align == b.band->align)
    r.band = Band{looser(a.band->left, b.band->left), looser(a.band->right, b.band->right), a.band->align};
  return r;
}

ScoreMod alibi(const Captured &slopes, std::source_location loc) {
  if (!slopes.shared_state())
    throw TraceError("alibi: the slopes capture is empty (default-constructed Captured); capture a buffer of f32 "
                     "slopes, one per query head, e.g. capture(buf, DType::f32) with alibi_slopes(heads)");
  return ScoreMod([slopes, loc](Tile s, Tile, Tile h, Tile q, Tile kv) {
    // s − slope·|q − kv| as one fma per score: the distance is formed in f32 from the row and column
    // indices (exact below 2^24), so the integer subtract and conversion are not paid per score.
    Tile slope = load(slopes(loc) + h, {}, {}, loc);
    return fma(abs(q.to(DType::f32) - kv.to(DType::f32)), -slope, s);
  }).with_builtin({.alibi_slopes = slopes, .alibi_loc = loc});
}

ScoreMod softcap(float cap) {
  if (!std::isfinite(cap) || cap <= 0)
    throw TraceError(fmt::format("softcap: the cap {} must be finite and > 0 (scores become cap·tanh(score/cap))", cap));
  return softcap(capture(cap));
}

std::vector<float> alibi_slopes(int heads) {
  if (heads < 0 || heads > 65535)
    throw TraceError(fmt::format("alibi_slopes: heads {} must be in [0, 65535]", heads));
  if (heads == 0) return {};
  auto pow2_slopes = [](int n) {
    std::vector<float> v(static_cast<size_t>(n));
    double start = std::pow(2.0, -8.0 / n);
    for (int i = 0; i < n; ++i) v[size_t(i)] = float(std::pow(start, i + 1));
    return v;
  };
  int n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<float> out = pow2_slopes(n);
  if (n == heads) return out;
  std::vector<float> twice = pow2_slopes(2 * n);
  for (int i = 0; int(out.size()) < heads; i += 2) out.push_back(twice[size_t(i)]);
  return out;
}

ScoreMod softcap(const Captured &cap) {
  if (!cap.shared_state())
    throw TraceError("softcap: the cap capture is empty (default-constructed Captured); use capture(50.f) or "
                     "softcap(50.f)");
  return ScoreMod([cap](Tile s, Tile, Tile, Tile, Tile) {
    // cap·tanh(s/cap) is even in cap: |cap|, kept ≥ FLT_MIN so that a cap of 0 gives scores of 0, not 0/0, and
    // ≤ 2^64 so that the factor the compiler folds into one multiplication, softmax scale/|cap|, stays a normal
    // f32 for any scale ≥ 2^-50 (a subnormal is flushed to 0 on the GPU, which would zero every score). Past 2^64
    // the cap changes no score below 2^52 in magnitude (tanh(x) = x in f32 for |x| < 2^-12), far beyond q·k.
    Tile c = minimum(maximum(abs(cap().to(DType::f32)), std::numeric_limits<float>::min()), 0x1p64f);
    return c * tanh(s / c);
  });
}

ScoreMod relative_position_bias(const Captured &table, int max_distance) {
  if (max_distance < 0)
    throw TraceError(fmt::format("relative_position_bias: max_distance {} must be ≥ 0", max_distance));
  return ScoreMod([table, max_distance](Tile s, Tile, Tile h, Tile q, Tile kv) {
    Tile rel = minimum(maximum(kv - q, -max_distance), max_distance) + max_distance;
    return s + load(table() + h * (2 * max_distance + 1) + rel);
  });
}

ScoreMod compose(const ScoreMod &first, const ScoreMod &second) {
  if (!first) return second;
  if (!second) return first;
  return ScoreMod([first, second](Tile s, Tile b, Tile h, Tile q, Tile kv) {
    return second(first(s, b, h, q, kv), b, h, q, kv);
  });
}

}  // namespace tilejit::attention
