// Checks of attention::flex_backward against float64 gradients, shared by the interpreter tests
// (test_flex_backward.cpp) and the GPU tests (gpu/test_gpu_flex_backward.cpp): every mod and mask kind,
// learnable captures, and bitwise determinism.
#pragma once
#include <catch2/catch.hpp>

#include <cstring>

#include "flex_backward_reference.h"
#include "tilejit/autodiff.h"
#include "tilejit/capture.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

namespace tilejit::testing {

inline std::function<bool(int, int, int, int, int, int)> band_visible(attention::Band band) {
  return [band](int, int, int q, int kv, int sq, int sk) { return ref_band(band, q, kv, sq, sk); };
}

/// Every mod and mask kind on case c (dense; its shape, dtype and block sizes): no mod, causal in both
/// alignments, a sliding window, the built-in and a user soft-cap, ALiBi, a user mod with exp/where and a
/// captured table, learnable captures (a bias table and ALiBi's slopes), and a mask function with rows that
/// see no key (the first five).
inline void check_backward_variants(Backend be, const FlexCase &c) {
  using attention::Align;
  using attention::FlexOptions;
  {
    INFO("no mod");
    require_backward_matches(run_backward_case(be, c, FlexOptions{}, {}), c.dtype);
  }
  {
    INFO("causal, both alignments");
    for (Align al : {Align::TopLeft, Align::BottomRight}) {
      INFO((al == Align::TopLeft ? "top-left" : "bottom-right"));
      FlexOptions o;
      o.mask = attention::causal(al);
      require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({-1, 0, al})}), c.dtype);
    }
  }
  {
    INFO("sliding window (7, 3)");
    FlexOptions o;
    o.mask = attention::sliding_window(7, 3);
    require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({7, 3, Align::TopLeft})}), c.dtype);
  }
  {
    INFO("soft-capping: the built-in and a user lambda");
    FlexOptions o;
    o.score_mod = attention::softcap(2.f);  // a small cap, so that tanh' differs from 1 visibly
    RefMods ref{[](double x, int, int, int, int) { return 2.0 * std::tanh(x / 2.0); }, {}};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
    o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return 2.f * tanh(s / 2.f); };
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  {
    INFO("ALiBi with causal masking");
    auto slopes_host = attention::alibi_slopes(c.shape.heads_q);
    Buffer slopes(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    FlexOptions o;
    o.score_mod = attention::alibi(capture(slopes, DType::f32));
    o.mask = attention::causal(Align::BottomRight);
    // ALiBi's distance is between q_idx and kv_idx as the mods see them (the band's alignment is the mask's).
    RefMods ref{[&](double x, int, int h, int q, int kv) { return x - double(slopes_host[size_t(h)]) * std::abs(q - kv); },
                band_visible({-1, 0, Align::BottomRight})};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  {
    INFO("a user mod mixing exp, where and a captured bias table");
    std::vector<float> table_host(64);
    for (size_t i = 0; i < table_host.size(); ++i) table_host[i] = 0.01f * float(int(i % 13) - 6);
    Buffer table(table_host.size() * 4, be);
    table.upload(table_host);
    Captured tab = capture(table, DType::f32);
    FlexOptions o;
    o.score_mod = [tab](Tile s, Tile, Tile, Tile q, Tile kv) {
      Tile bias = load(tab() + ((q - kv) & 63));
      return where(s > 0.f, s * 0.5f + bias, exp(s) - 1.f + bias);
    };
    RefMods ref{[&](double x, int, int, int q, int kv) {
                  double bias = table_host[size_t((q - kv) & 63)];
                  return x > 0 ? x * 0.5 + bias : std::exp(x) - 1 + bias;
                },
                {}};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  {
    INFO("learnable captures: a relative-position bias table and ALiBi's slopes get their gradients");
    const int H = c.shape.heads_q;
    std::vector<float> table_host(size_t(H) * 64);
    for (size_t i = 0; i < table_host.size(); ++i) table_host[i] = 0.02f * float(int(i % 11) - 5);
    Buffer table(table_host.size() * 4, be), table_grad(table_host.size() * 4, be);
    table.upload(table_host);
    Captured tab = capture(table, DType::f32, table_grad);
    auto slopes_host = attention::alibi_slopes(H);
    Buffer slopes(slopes_host.size() * 4, be), slopes_grad(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    // A capture's gradient is a sum of dZ terms that largely cancel (Σ_j dZ_ij = 0 in every row), so each
    // entry's error is bounded relative to the sum of its terms' magnitudes (tolerance(dt) of it), not to
    // the small sum itself; summed in fixed point, each term may also be rounded by 2^-53 (half the low unit).
    struct Sums {
      std::vector<double> want, magnitude, terms;
      explicit Sums(size_t n) : want(n), magnitude(n), terms(n) {}
      void add(size_t e, double term) {
        want[e] += term;
        magnitude[e] += std::fabs(term);
        terms[e] += 1;
      }
    };
    auto check_sums = [&](const char *what, const std::vector<float> &got, const Sums &ref, bool atomics) {
      const double rounding = atomics ? 0.0 : std::ldexp(1.0, -kFixedPointLowBits - 1);
      for (size_t e = 0; e < got.size(); ++e) {
        INFO(what << (atomics ? " (f32 atomics)" : " (fixed point)") << " entry " << e << ": got " << got[e]
                  << ", float64 " << ref.want[e] << ", Σ|terms| " << ref.magnitude[e] << " over " << ref.terms[e]
                  << " terms");
        CHECK(std::fabs(got[e] - ref.want[e]) <=
              backward_tolerance(c.dtype) * ref.magnitude[e] + rounding * ref.terms[e] + 1e-30);
      }
    };
    for (bool atomics : {false, true}) {
      FlexOptions o;
      o.atomics = atomics;
      o.score_mod = [tab](Tile s, Tile, Tile h, Tile q, Tile kv) { return s + load(tab() + h * 64 + ((q - kv) & 63)); };
      // The gradient buffers start nonzero: the backward adds into them.
      std::vector<float> grad_start(table_host.size());
      for (size_t i = 0; i < grad_start.size(); ++i) grad_start[i] = 0.25f * float(int(i % 5) - 2);
      table_grad.upload(grad_start);
      Sums table_sums(table_host.size());
      for (size_t e = 0; e < grad_start.size(); ++e) table_sums.want[e] = grad_start[e];
      RefMods ref{[&](double x, int, int h, int q, int kv) { return x + table_host[size_t(h * 64 + ((q - kv) & 63))]; },
                  {}};
      auto r = run_backward_case(be, c, o, ref, [&](int, int h, int i, int j, double dz) {
        table_sums.add(size_t(h * 64 + ((i - j) & 63)), dz);
      });
      require_backward_matches(r, c.dtype);
      check_sums("bias table gradient", table_grad.download_as<float>(table_host.size()), table_sums, atomics);

      slopes_grad.upload(std::vector<float>(slopes_host.size(), 0.f));
      o.score_mod = attention::alibi(capture(slopes, DType::f32, slopes_grad));
      o.mask = attention::causal(Align::BottomRight);
      Sums slope_sums(slopes_host.size());
      RefMods alibi_ref{
          [&](double x, int, int h, int q, int kv) { return x - double(slopes_host[size_t(h)]) * std::abs(q - kv); },
          band_visible({-1, 0, Align::BottomRight})};
      auto ra = run_backward_case(be, c, o, alibi_ref, [&](int, int h, int i, int j, double dz) {
        slope_sums.add(size_t(h), -std::abs(i - j) * dz);
      });
      require_backward_matches(ra, c.dtype);
      check_sums("ALiBi slopes gradient", slopes_grad.download_as<float>(slopes_host.size()), slope_sums, atomics);
    }
  }
  // Rows 0–4 see no key: the reference calls them empty, they match it, and their dq is exactly zero.
  auto check_first_rows_empty = [&](const FlexOptions &o, const RefMods &ref) {
    auto r = run_backward_case(be, c, o, ref);
    const int B = c.shape.batch, H = c.shape.heads_q, Sq = c.shape.seqlen_q, D = c.shape.head_dim_qk;
    REQUIRE(r.empty_rows == B * H * std::min(5, Sq));
    require_backward_matches(r, c.dtype);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < std::min(5, Sq); ++i)
          for (int d = 0; d < D; ++d) REQUIRE(r.dq[((size_t(b) * H + h) * Sq + i) * D + d] == 0.f);
  };
  {
    INFO("a mask function with rows that see no key");
    FlexOptions o;
    o.mask.fn = [](Tile, Tile h, Tile q, Tile kv) { return (q >= 5) & (((q + kv + h) % 3) != 0); };
    check_first_rows_empty(o, {{}, [](int, int h, int q, int kv, int, int) { return q >= 5 && (q + kv + h) % 3 != 0; }});
  }
  {
    // No mask: every tile inside the sequence takes the arm without masking, where such rows must still get
    // p = 0 and zero gradients (as where a mask hides them).
    INFO("a score_mod that leaves rows no finite score (lse −inf), without a mask");
    FlexOptions o;
    o.score_mod = [](Tile s, Tile, Tile, Tile q, Tile) {
      return where(q >= 5, s, -std::numeric_limits<float>::infinity());
    };
    check_first_rows_empty(o, {{}, [](int, int, int q, int, int, int) { return q >= 5; }});
  }
}

/// Runs the backward in its default mode (dQ in its own pass, capture gradients in fixed point) `runs` times
/// on one set of inputs (causal, a user soft-cap plus a learnable per-head relative-position bias table) and
/// requires dq, dk, dv and the table's gradient to be bitwise identical every time.
inline void check_backward_deterministic(Backend be, const FlexCase &c, int runs) {
  const int H = c.shape.heads_q;
  std::vector<float> table_host = random_values(size_t(H) * 64, DType::f32);
  Buffer table(table_host.size() * 4, be), table_grad(table_host.size() * 4, be);
  table.upload(table_host);
  Captured tab = capture(table, DType::f32, table_grad);
  attention::FlexOptions o;
  o.score_mod = [tab](Tile s, Tile, Tile h, Tile q, Tile kv) {
    return 3.f * tanh(s / 3.f) + load(tab() + h * 64 + ((q - kv) & 63));
  };
  o.mask = attention::causal(attention::Align::BottomRight);
  o.backend = be;
  o.dtype = c.dtype;
  o.block_m = c.block_m;
  o.block_n = c.block_n;
  const attention::FlexShape &s = c.shape;
  const int Hkv = s.heads_kv ? s.heads_kv : s.heads_q, Dv = s.head_dim_v ? s.head_dim_v : s.head_dim_qk;
  const size_t nq = size_t(s.batch) * s.heads_q * s.seqlen_q * s.head_dim_qk;
  const size_t nk = size_t(s.batch) * Hkv * s.seqlen_k * s.head_dim_qk, nv = size_t(s.batch) * Hkv * s.seqlen_k * Dv;
  const size_t no = size_t(s.batch) * s.heads_q * s.seqlen_q * Dv;
  auto bq = upload_as(random_values(nq, c.dtype), c.dtype, be), bk = upload_as(random_values(nk, c.dtype), c.dtype, be);
  auto bv = upload_as(random_values(nv, c.dtype), c.dtype, be), bdo = upload_as(random_values(no, c.dtype), c.dtype, be);
  Buffer out(no * 2, be), lse(size_t(s.batch) * s.heads_q * s.seqlen_q * 4, be);
  attention::flex_forward(bq, bk, bv, out, lse, s, o);
  std::vector<float> first;
  for (int run = 0; run < runs; ++run) {
    Buffer dq(nq * 2, be), dk(nk * 2, be), dv(nv * 2, be);
    for (Buffer *b : {&dq, &dk, &dv}) b->fill_bytes(uint8_t(0x11 * (run % 7 + 1)));  // a different poison each run
    table_grad.upload(std::vector<float>(table_host.size(), 0.f));
    attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, o);
    std::vector<float> all = download_as_float(dq, nq, c.dtype);
    auto grads = table_grad.download_as<float>(table_host.size());
    all.insert(all.end(), grads.begin(), grads.end());
    for (auto [b, n] : {std::pair{&dk, nk}, std::pair{&dv, nv}}) {
      auto part = download_as_float(*b, n, c.dtype);
      all.insert(all.end(), part.begin(), part.end());
    }
    if (run == 0) first = std::move(all);
    else {
      INFO("run " << run);
      REQUIRE(std::memcmp(first.data(), all.data(), first.size() * 4) == 0);
    }
  }
}

}  // namespace tilejit::testing
