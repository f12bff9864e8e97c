// The flex attention checks, shared by the CPU (interpreter) and GPU test binaries: each builds a variant,
// its float64 twin, and compares on fresh random inputs (see flex_reference.h).
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "flex_reference.h"
#include "kernels/flex/flex_internal.h"
#include "tilejit/ops.h"

namespace tilejit::testing {

using attention::Align;
using attention::FlexOptions;

/// Soft-capping at the edges of the fixed-reference softmax (ScoreFrame::FixedReference: bf16, scores within
/// 2·55·log2e log2 units) and just past them (the running max): rows whose every visible score is pinned at −cap
/// (ALiBi with slope 1000 then the cap, the diagonal masked out) must not underflow, and rows with no visible key
/// still end with 0 and lse −inf. Caps 50 and 55 take the fixed reference, 56 and every f16 case the online
/// softmax. Both as flex_variants.h's compose(alibi, softcap) and as a user's lambda over a captured cap.
inline void check_softcap_bound_edges(Backend be, int block_m, int block_n) {
  for (DType dt : {DType::bf16, DType::f16})
    for (float cap : {50.f, 55.f, 56.f}) {
      FlexCase c;
      c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 70, .seqlen_k = 45, .head_dim_qk = 32};
      c.dtype = dt;
      c.block_m = block_m;
      c.block_n = block_n;
      INFO("cap " << cap << ", " << dtype_name(dt) << ", blocks " << block_m << "x" << block_n);
      std::vector<float> slopes_host{1000.f, 0.25f};
      Buffer slopes(slopes_host.size() * 4, be);
      slopes.upload(slopes_host);
      Captured slopes_cap = capture(slopes, DType::f32), cap_cap = capture(cap);
      for (bool lambda : {false, true}) {
        INFO((lambda ? "user lambda" : "flex_variants.h"));
        FlexOptions o;
        c.block_mask_mode = attention::BlockMaskMode::Auto;
        o.score_mod = attention::compose(attention::alibi(slopes_cap), attention::softcap(cap));
        if (lambda)
          o.score_mod = [slopes_cap, cap_cap](Tile s, Tile, Tile h, Tile q, Tile kv) {
            Tile x = s - load(slopes_cap() + h) * abs(q - kv).to(DType::f32);
            return cap_cap() * tanh(x / cap_cap());
          };
        // bf16 with |cap| ≤ 55 takes the fixed reference, the rest the running max.
        const bool want_fixed = dt == DType::bf16 && cap <= 55.f;
        FlexOptions as_launched = o;
        as_launched.dtype = dt;
        CHECK((attention::flex::score_frame(as_launched, false).kind == attention::flex::ScoreFrame::FixedReference) ==
              want_fixed);
        // Query i sees keys j ≤ i − 2 and j ≥ i + 2: never its own (distance 0), so with slope 1000 every score
        // of head 0 is −cap + tiny.
        o.mask = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return (q - kv >= 2) | (kv - q >= 2); });
        auto score = [&](double s, int, int h, int q, int kv) {
          return double(cap) * std::tanh((s - double(slopes_host[size_t(h)]) * std::abs(q - kv)) / cap);
        };
        auto visible = [](int, int, int q, int kv, int, int) { return q - kv >= 2 || kv - q >= 2; };
        require_matches(run_flex_case(be, c, o, {score, visible}), dt);
        // A mask that hides every key from every row: output 0, lse −inf on both paths. Without a block mask,
        // so that the kernel visits the key blocks and masks every score (a block mask would skip them all).
        o.mask = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return q < 0; });
        c.block_mask_mode = attention::BlockMaskMode::Off;
        require_matches(run_flex_case(be, c, o, {score, [](int, int, int, int, int, int) { return false; }}), dt);
      }
    }
}

/// Scores of huge magnitude, as models write "soft masks" (−1e10, −1e30, −FLT_MAX) and their positive twins,
/// from a user score_mod: alone in a row (every key the same score: the softmax is uniform), mixed with ordinary
/// scores, with both signs, with keys masked by a mask function or by −inf from the mod, and changing between key
/// blocks (keys before or from position 20); and ALiBi with huge slopes written as a score_mod (alone and then
/// soft-capped). Each against the float64 softmax of the same f32
/// scores (require_matches: the dtype's output tolerance, lse within 1e-3 relative, empty rows 0 and −inf),
/// and nothing NaN. Rows 0..2 see no key where a mask function is used.
inline void check_flex_extreme_scores(Backend be, DType dt, int block_m, int block_n, int seqlen_q, int seqlen_k) {
  constexpr float kFltMax = std::numeric_limits<float>::max();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = seqlen_q, .seqlen_k = seqlen_k, .head_dim_qk = 16};
  c.dtype = dt;
  c.block_m = block_m;
  c.block_n = block_n;
  auto no_nan = [](const FlexResult &r) {
    for (float x : r.out) REQUIRE_FALSE(std::isnan(x));
    for (float x : r.lse) REQUIRE_FALSE(std::isnan(x));
  };
  auto run = [&](const std::string &what, const FlexOptions &o, const RefMods &ref) {
    INFO(what << ", " << dtype_name(dt) << ", blocks " << block_m << "x" << block_n);
    FlexResult r = run_flex_case(be, c, o, ref);
    no_nan(r);
    require_matches(r, dt);
  };

  // One mod object per pattern; the magnitude is a captured scalar, so the patterns trace once.
  Captured mag = capture(0.f);
  using Fn = std::function<Tile(Tile s, Tile kv, Tile m)>;
  using RefFn = std::function<double(double s, int kv, float m)>;
  struct Pattern {
    const char *name;
    Fn fn;
    RefFn ref;
  };
  const std::vector<Pattern> patterns = {
      {"every key M", [](Tile s, Tile kv, Tile m) { return where(kv >= 0, m, s); },
       [](double, int, float m) { return double(m); }},
      {"every third key M", [](Tile s, Tile kv, Tile m) { return where(kv % 3 == 1, m, s); },
       [](double s, int kv, float m) { return kv % 3 == 1 ? double(m) : s; }},
      {"M, -M and ordinary", [](Tile s, Tile kv, Tile m) { return where(kv % 3 == 0, m, where(kv % 3 == 1, -m, s)); },
       [](double s, int kv, float m) { return kv % 3 == 0 ? double(m) : kv % 3 == 1 ? -double(m) : s; }},
      {"M - 8·(kv % 3)", [](Tile s, Tile kv, Tile m) { return where(kv >= 0, m - (kv % 3).to(DType::f32) * 8.f, s); },
       [](double, int kv, float m) { return double(m - float(8 * (kv % 3))); }},
      {"keys before 20 M", [](Tile s, Tile kv, Tile m) { return where(kv < 20, m, s); },
       [](double s, int kv, float m) { return kv < 20 ? double(m) : s; }},
      {"keys from 20 M", [](Tile s, Tile kv, Tile m) { return where(kv >= 20, m, s); },
       [](double s, int kv, float m) { return kv >= 20 ? double(m) : s; }},
      {"-inf from the mod, M",
       [=](Tile s, Tile kv, Tile m) { return where(kv % 5 == 2, neg_inf, where(kv % 3 == 1, m, s)); },
       [](double s, int kv, float m) { return kv % 5 == 2 ? -INFINITY : kv % 3 == 1 ? double(m) : s; }},
  };
  auto mask_fn = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return (kv % 4 != 0) & (q >= 3); });
  auto mask_ref = [](int, int, int q, int kv, int, int) { return kv % 4 != 0 && q >= 3; };
  for (const Pattern &pat : patterns) {
    FlexOptions o;
    Fn fn = pat.fn;
    o.score_mod = attention::ScoreMod([fn, mag](Tile s, Tile, Tile, Tile, Tile kv) { return fn(s, kv, mag()); });
    for (float m : {1e4f, 1e8f, 4.5e8f, 1e10f, 1e30f, 1e38f, kFltMax})
      for (float sign : {-1.f, 1.f}) {
        const float sm = sign * m;
        mag.set(double(sm));
        RefFn rf = pat.ref;
        RefMods ref{[rf, sm](double s, int, int, int, int kv) { return rf(s, kv, sm); }, {}};
        std::string what = fmt::format("{} with M = {:g}", pat.name, sm);
        o.mask = {};
        run(what, o, ref);
        o.mask = mask_fn;
        ref.visible = mask_ref;
        run(what + ", mask kv % 4 != 0 and q >= 3", o, ref);
      }
  }
  // A causal band with every visible key at M.
  {
    FlexOptions o;
    o.score_mod = attention::ScoreMod([mag](Tile s, Tile, Tile, Tile, Tile kv) { return where(kv >= 0, mag(), s); });
    o.mask = attention::causal(Align::BottomRight);
    for (float m : {-kFltMax, -1e10f, 1e30f}) {
      mag.set(double(m));
      auto band = [](int, int, int q, int kv, int sq, int sk) {
        return ref_band({-1, 0, Align::BottomRight}, q, kv, sq, sk);
      };
      run(fmt::format("causal, every key {:g}", m), o, {[m](double, int, int, int, int) { return double(m); }, band});
    }
  }
  // ALiBi with huge slopes written as a user's score_mod (captured slopes): rows past the keys' end see every
  // key at −slope·distance ≥ slope, and rows whose diagonal comes in a later key block than their first. (The
  // built-in ALiBi and soft-cap, and no mod at all, keep the bounded frame: flex_attention.h states their range.)
  {
    const int keys = c.shape.seqlen_k;
    c.shape.seqlen_k = std::max(1, seqlen_q / 2);
    std::vector<float> slopes_host{1e20f, 0.5f};
    Buffer slopes(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    auto alibi_ref = [slopes_host](double s, int, int h, int q, int kv) {
      return s - double(slopes_host[size_t(h)]) * std::abs(q - kv);
    };
    auto slope = capture(slopes, DType::f32);
    FlexOptions o;
    o.score_mod = [slope](Tile s, Tile, Tile h, Tile q, Tile kv) {
      return s - load(slope() + h) * abs(q - kv).to(DType::f32);
    };
    run("user alibi, slopes 1e20 and 0.5", o, {alibi_ref, {}});
    o.score_mod = [slope](Tile s, Tile, Tile h, Tile q, Tile kv) {
      return 1e25f * tanh((s - load(slope() + h) * abs(q - kv).to(DType::f32)) / 1e25f);
    };
    auto capped = [alibi_ref](double s, int b, int h, int q, int kv) {
      return 1e25 * std::tanh(alibi_ref(s, b, h, q, kv) / 1e25);
    };
    run("user alibi then softcap 1e25", o, {capped, {}});
    c.shape.seqlen_k = keys;
  }
}

/// A row whose max crosses between the online softmax's frames from one key block to a later one
/// (kernels/online_softmax.h: the exact frame starts at |m·log2e| = 2^28 for f16, 2^30 for bf16, after a
/// user score_mod): the first four key blocks' keys all at m_old, one key of the fifth at m_new, the rest −inf,
/// with m_old and m_new neighbouring f32 values on either side of the switch (both signs: ordinary to exact
/// and back). The earlier blocks' exact weight is e^-(m_new − m_old) each (e^-16 for f16); the kernel must drop
/// them, where rescaling their p in the new frame would keep up to 2^-9.9 of each for f16 (the old reference's
/// rounding error, 6.07 log2 units there, against the gap of 16).
inline void check_flex_frame_switch(Backend be, DType dt, int block_m, int block_n) {
  const float log2e = 1.4426950408889634f;
  const float bound = dt == DType::f16 ? 0x1p28f : 0x1p30f;
  const float t = bound / log2e;  // the smallest |m| in the exact frame, as the kernel computes it
  const float below = std::nextafter(t, 0.f);
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 5 * block_n, .head_dim_qk = 16};
  c.dtype = dt;
  c.block_m = block_m;
  c.block_n = block_n;
  const int old_keys = 4 * block_n, new_key = 4 * block_n + 6;
  Captured m_old = capture(0.f), m_new = capture(0.f);
  FlexOptions o;
  o.score_mod = attention::ScoreMod([=](Tile s, Tile, Tile, Tile, Tile kv) {
    return where(kv < old_keys, m_old(), where(kv == new_key, m_new(), where(kv >= 0, -INFINITY, s)));
  });
  for (auto [from, to] : {std::pair{below, t}, std::pair{-t, -below}}) {
    m_old.set(double(from));
    m_new.set(double(to));
    RefMods ref{[=](double, int, int, int, int kv) {
                  return kv < old_keys ? double(from) : kv == new_key ? double(to) : -INFINITY;
                },
                {}};
    INFO("keys before " << old_keys << " at " << from << ", key " << new_key << " at " << to << ", "
                        << dtype_name(dt) << ", blocks " << block_m << "x" << block_n);
    require_matches(run_flex_case(be, c, o, ref), dt);
  }
}

/// Every built-in variant and composition on one shape.
inline void check_flex_variants(Backend be, attention::FlexShape shape, DType dt, int block_m, int block_n) {
  FlexCase c;
  c.shape = shape;
  c.dtype = dt;
  c.block_m = block_m;
  c.block_n = block_n;
  const int H = shape.heads_q;
  auto run = [&](const char *name, FlexOptions opt, RefMods ref) {
    INFO("variant " << name << ", seqlen_q " << shape.seqlen_q << ", seqlen_k " << shape.seqlen_k << ", "
                    << dtype_name(dt) << ", blocks " << block_m << "x" << block_n);
    require_matches(run_flex_case(be, c, std::move(opt), ref), dt);
  };
  auto band_ref = [](attention::Band band) {
    return [band](int, int, int q, int kv, int sq, int sk) { return ref_band(band, q, kv, sq, sk); };
  };

  run("full", {}, {});
  for (Align al : {Align::TopLeft, Align::BottomRight}) {
    FlexOptions o;
    o.mask = attention::causal(al);
    run(al == Align::TopLeft ? "causal top-left" : "causal bottom-right", o, {{}, band_ref({-1, 0, al})});
    o.mask = attention::sliding_window(5, 2, al);
    run("sliding window (5, 2)", o, {{}, band_ref({5, 2, al})});
  }
  // ALiBi with the paper's slopes.
  auto slopes_host = attention::alibi_slopes(H);
  Buffer slopes(slopes_host.size() * 4, be);
  slopes.upload(slopes_host);
  {
    FlexOptions o;
    o.score_mod = attention::alibi(capture(slopes, DType::f32));
    o.mask = attention::causal(Align::TopLeft);
    run("alibi + causal", o,
        {[&](double s, int, int h, int q, int kv) { return s - double(slopes_host[size_t(h)]) * std::abs(q - kv); },
         band_ref({-1, 0, Align::TopLeft})});
  }
  // The same through the generic path (a user function calling the built-in has no built-in form), and
  // ALiBi then soft-capping (a composition: a function too).
  {
    FlexOptions o;
    attention::ScoreMod builtin = attention::alibi(capture(slopes, DType::f32));
    o.score_mod = attention::ScoreMod(
        [builtin](Tile s, Tile b, Tile h, Tile q, Tile kv) { return builtin(s, b, h, q, kv); });
    auto alibi_ref = [&](double s, int, int h, int q, int kv) {
      return s - double(slopes_host[size_t(h)]) * std::abs(q - kv);
    };
    run("alibi as a user function", o, {alibi_ref, {}});
    o.score_mod = attention::compose(builtin, attention::softcap(capture(-0.75f)));  // cap's sign: no effect
    run("alibi then softcap -0.75", o,
        {[&](double s, int b, int h, int q, int kv) { return 0.75 * std::tanh(alibi_ref(s, b, h, q, kv) / 0.75); },
         {}});
  }
  // Soft-capping; a small cap so it matters on these scores.
  {
    FlexOptions o;
    attention::ScoreMod builtin = attention::softcap(0.5f);
    o.score_mod = attention::ScoreMod(
        [builtin](Tile s, Tile b, Tile h, Tile q, Tile kv) { return builtin(s, b, h, q, kv); });
    run("softcap 0.5 as a user function", o, {[](double s, int, int, int, int) { return 0.5 * std::tanh(s / 0.5); }, {}});
    o.score_mod = builtin;
    run("softcap 0.5", o, {[](double s, int, int, int, int) { return 0.5 * std::tanh(s / 0.5); }, {}});
    o.mask = attention::sliding_window(7, 0);
    run("softcap + sliding window (Gemma 2)", o,
        {[](double s, int, int, int, int) { return 0.5 * std::tanh(s / 0.5); }, band_ref({7, 0, Align::TopLeft})});
  }
  // Relative-position bias table [H, 2·M + 1].
  {
    const int M = 4;
    auto table_host = random_values(size_t(H) * (2 * M + 1), DType::f32, -2.f, 2.f);
    Buffer table(table_host.size() * 4, be);
    table.upload(table_host);
    FlexOptions o;
    o.score_mod = attention::relative_position_bias(capture(table, DType::f32), M);
    run("relative position bias", o,
        {[&](double s, int, int h, int q, int kv) {
           int rel = std::clamp(kv - q, -M, M) + M;
           return s + double(table_host[size_t(h) * (2 * M + 1) + size_t(rel)]);
         },
         {}});
  }
  // Document masking (self-attention shapes only) and prefix-LM.
  if (shape.seqlen_q == shape.seqlen_k) {
    const int S = shape.seqlen_q;
    std::vector<int> docs(size_t(shape.batch) * S);
    for (int b = 0; b < shape.batch; ++b)
      for (int i = 0; i < S; ++i) docs[size_t(b) * S + i] = (i * 3 + b) / 11;  // documents of ~4 tokens
    Buffer doc_ids(std::max<size_t>(docs.size(), 1) * 4, be);
    doc_ids.upload(docs);
    FlexOptions o;
    o.mask = attention::document_mask(capture(doc_ids, DType::i32));
    auto doc_ref = [&, S](int b, int, int q, int kv, int, int) {
      return docs[size_t(b) * S + q] == docs[size_t(b) * S + kv];
    };
    run("document mask", o, {{}, doc_ref});
    o.mask = attention::and_masks(attention::causal(Align::TopLeft), attention::document_mask(capture(doc_ids, DType::i32)));
    run("causal and document", o,
        {{}, [&](int b, int h, int q, int kv, int sq, int sk) { return kv <= q && doc_ref(b, h, q, kv, sq, sk); }});
  }
  {
    FlexOptions o;
    o.mask = attention::prefix_lm(capture(int32_t(5)));
    run("prefix-LM 5", o, {{}, [](int, int, int q, int kv, int, int) { return kv <= q || kv < 5; }});
  }
  // Compositions of bands and functions.
  {
    FlexOptions o;
    o.mask = attention::or_masks(attention::sliding_window(3, 0), attention::sliding_window(0, 3, Align::BottomRight));
    run("window or bottom-right window", o,
        {{}, [](int, int, int q, int kv, int sq, int sk) {
           return ref_band({3, 0, Align::TopLeft}, q, kv, sq, sk) || ref_band({0, 3, Align::BottomRight}, q, kv, sq, sk);
         }});
    o.mask = attention::and_masks(attention::causal(Align::TopLeft), attention::causal(Align::BottomRight));
    run("causal top-left and bottom-right", o,
        {{}, [](int, int, int q, int kv, int sq, int sk) {
           return ref_band({-1, 0, Align::TopLeft}, q, kv, sq, sk) && ref_band({-1, 0, Align::BottomRight}, q, kv, sq, sk);
         }});
    // A user mask function: even keys only, with a score_mod that reads b and h.
    o.mask = attention::Mask([](Tile, Tile, Tile, Tile kv) { return (kv % 2) == 0; });
    o.score_mod = [](Tile s, Tile b, Tile h, Tile, Tile) { return s + (b + h * 2).to(DType::f32) * 0.25f; };
    run("user mask and score_mod", o,
        {[](double s, int b, int h, int, int) { return s + (b + h * 2) * 0.25; },
         [](int, int, int, int kv, int, int) { return kv % 2 == 0; }});
  }
}

/// Grouped-query / multi-query attention with a causal mask and an ALiBi-like per-head score_mod.
inline void check_flex_gqa(Backend be, int heads_q, int heads_kv, int seqlen, DType dt, int block_m = 16,
                           int block_n = 16) {
  FlexCase c;
  c.block_m = block_m;
  c.block_n = block_n;
  c.shape = {.batch = 2, .heads_q = heads_q, .heads_kv = heads_kv, .seqlen_q = seqlen, .seqlen_k = seqlen,
             .head_dim_qk = 32};
  c.dtype = dt;
  FlexOptions o;
  o.mask = attention::causal(Align::TopLeft);
  o.score_mod = [](Tile s, Tile, Tile h, Tile, Tile) { return s * (1.f + h.to(DType::f32) * 0.5f); };
  RefMods ref{[](double s, int, int h, int, int) { return s * (1.0 + h * 0.5); },
              [](int, int, int q, int kv, int, int) { return kv <= q; }};
  INFO("GQA heads_q " << heads_q << " heads_kv " << heads_kv);
  require_matches(run_flex_case(be, c, o, ref), dt);
}

/// Variable-length batch (lengths may be 0) with an optional bottom-right causal mask.
inline void check_flex_varlen(Backend be, std::vector<int> lens_q, std::vector<int> lens_k, bool causal, DType dt,
                              int block_m = 16, int block_n = 16, bool documents = false) {
  FlexCase c;
  c.block_m = block_m;
  c.block_n = block_n;
  c.shape = {.batch = 0, .heads_q = 2, .heads_kv = 1, .seqlen_q = 0, .seqlen_k = 0, .head_dim_qk = 32};
  c.seqlens_q = std::move(lens_q);
  c.seqlens_k = std::move(lens_k);
  c.dtype = dt;
  FlexOptions o;
  RefMods ref;
  if (causal) {
    o.mask = attention::causal(Align::BottomRight);
    ref.visible = [](int, int, int q, int kv, int sq, int sk) {
      return ref_band({-1, 0, Align::BottomRight}, q, kv, sq, sk);
    };
  }
  // Documents inside each packed sequence: ids per packed token (self-attention: lens_q == lens_k).
  std::vector<int> docs, cu{0};
  for (int n : c.seqlens_q) cu.push_back(cu.back() + n);
  for (size_t b = 0; b < c.seqlens_q.size(); ++b)
    for (int i = 0; i < c.seqlens_q[b]; ++i) docs.push_back(int(b) * 100 + i / 6);
  Buffer doc_ids(std::max<size_t>(docs.size(), 1) * 4, be);
  if (documents) {
    doc_ids.upload(docs);
    o.mask = attention::and_masks(o.mask, attention::document_mask(capture(doc_ids, DType::i32)));
    auto inner = ref.visible;
    ref.visible = [inner, docs, cu](int b, int h, int q, int kv, int sq, int sk) {
      return (!inner || inner(b, h, q, kv, sq, sk)) && docs[size_t(cu[size_t(b)] + q)] == docs[size_t(cu[size_t(b)] + kv)];
    };
  }
  INFO("varlen" << (causal ? " causal bottom-right" : "") << (documents ? " with documents" : ""));
  require_matches(run_flex_case(be, c, o, ref), dt);
}

/// Head dims that need padding, and a v head dim different from q·k's.
inline void check_flex_head_dims(Backend be, int dqk, int dv, int seqlen, DType dt, int block_m = 16,
                                 int block_n = 16) {
  FlexCase c;
  c.block_m = block_m;
  c.block_n = block_n;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = seqlen, .seqlen_k = seqlen + 5, .head_dim_qk = dqk,
             .head_dim_v = dv};
  c.dtype = dt;
  FlexOptions o;
  o.mask = attention::causal(Align::BottomRight);
  INFO("head dims qk " << dqk << " v " << dv);
  require_matches(run_flex_case(be, c, o,
                                {{}, [](int, int, int q, int kv, int sq, int sk) {
                                   return ref_band({-1, 0, Align::BottomRight}, q, kv, sq, sk);
                                 }}),
                  dt);
}

}  // namespace tilejit::testing
