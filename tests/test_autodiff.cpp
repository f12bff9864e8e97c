// vjp (tilejit/autodiff.h): the gradients it traces, run on the interpreter, against central differences of
// the same math in float64 on the host; shape ops and reductions against exact float64 sums; its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tilejit/autodiff.h"
#include "tilejit/tilejit.h"

using namespace tilejit;
using Catch::Matchers::Contains;

namespace {

constexpr int kN = 64;
// f32 adjoints of f32 math: within this much of the float64 derivative, relative to max(1, |derivative|).
constexpr double kTolF32 = 1e-4;

struct Case {
  const char *name;
  std::function<Tile(const Tile &, const Tile &, const Tile &)> device;  // (x, y, index) → out
  std::function<double(double, double, int)> host;                        // the same math in float64
};

// Runs out = f(x, y) and both gradients of Σ dout ∘ out on the interpreter.
void run_case(const Case &c, const std::vector<float> &x, const std::vector<float> &y, const std::vector<float> &dout,
              std::vector<float> &gx, std::vector<float> &gy) {
  auto f = c.device;
  Kernel k(std::string("vjp_") + c.name,
           [f](Ptr<f32> X, Ptr<f32> Y, Ptr<f32> D, Ptr<f32> GX, Ptr<f32> GY) {
             Tile i = arange(0, kN);
             Tile xv = load(X + i), yv = load(Y + i), d = load(D + i);
             Tile out = f(xv, yv, i);
             store(GX + i, vjp(out, xv, d));
             store(GY + i, vjp(out, yv, d));
           },
           {"x", "y", "dout", "gx", "gy"});
  const Backend be = Backend::Interpreter;
  Buffer bx(kN * 4, be), by(kN * 4, be), bd(kN * 4, be), bgx(kN * 4, be), bgy(kN * 4, be);
  bx.upload(x);
  by.upload(y);
  bd.upload(dout);
  bgx.upload(std::vector<float>(kN, NAN));  // poison
  bgy.upload(std::vector<float>(kN, NAN));
  k.launch(Grid{1}, LaunchConfig{.backend = be}, bx, by, bd, bgx, bgy);
  gx = bgx.download_as<float>(kN);
  gy = bgy.download_as<float>(kN);
}

}  // namespace

TEST_CASE("vjp: every differentiable op against float64 central differences (interpreter)", "[dsl][autodiff]") {
  const std::vector<Case> cases = {
      {"arith", [](auto &x, auto &y, auto &) { return x * y + x / y - y; },
       [](double x, double y, int) { return x * y + x / y - y; }},
      {"exp_sigmoid", [](auto &x, auto &y, auto &) { return exp(x) * sigmoid(y); },
       [](double x, double y, int) { return std::exp(x) / (1 + std::exp(-y)); }},
      {"log_abs_sqrt", [](auto &x, auto &y, auto &) { return log(abs(x) + 1.f) + sqrt(y * y + 1.f); },
       [](double x, double y, int) { return std::log(std::fabs(x) + 1) + std::sqrt(y * y + 1); }},
      {"softcap", [](auto &x, auto &y, auto &) { return y * tanh(x / y); },
       [](double x, double y, int) { return y * std::tanh(x / y); }},
      {"rsqrt_exp2_log2", [](auto &x, auto &y, auto &) { return rsqrt(y * y + 2.f) + exp2(x) - log2(y * y + 1.f); },
       [](double x, double y, int) { return 1 / std::sqrt(y * y + 2) + std::exp2(x) - std::log2(y * y + 1); }},
      {"min_max", [](auto &x, auto &y, auto &) { return minimum(x, y) + maximum(x * 2.f, y); },
       [](double x, double y, int) { return std::min(x, y) + std::max(x * 2, y); }},
      {"where", [](auto &x, auto &y, auto &) { return where(x > y, x * x, y * 3.f); },
       [](double x, double y, int) { return x > y ? x * x : y * 3; }},
      {"fma_neg", [](auto &x, auto &y, auto &) { return fma(x, y, -x); },
       [](double x, double y, int) { return x * y - x; }},
      // Casts pass the gradient straight through (the rounding's derivative is taken as 1).
      {"casts", [](auto &x, auto &y, auto &) { return x.to(DType::f16).to(DType::f32) * y; },
       [](double x, double y, int) { return x * y; }},
      // Positions (integers) carry no gradient; a bias of the positions only shifts the output.
      {"positions", [](auto &x, auto &y, auto &i) { return x * (i % 5).to(DType::f32) + y + (i * 2).to(DType::f32); },
       [](double x, double y, int i) { return x * (i % 5) + y + 2 * i; }},
      // A scalar splat into the tile and a literal: f(x, y) = x · 0.5 + 3.
      {"literals", [](auto &x, auto &, auto &) { return x * 0.5f + 3.f; },
       [](double x, double, int) { return x * 0.5 + 3; }},
  };
  std::mt19937 rng(20261202);
  std::uniform_real_distribution<float> ux(-2.f, 2.f), uy(0.5f, 2.f), ud(-1.f, 1.f);
  for (const Case &c : cases) {
    INFO("case " << c.name);
    std::vector<float> x(kN), y(kN), d(kN), gx, gy;
    // x on a grid of 1/256, exact in f16, so that the casts case's rounding is the identity on it.
    for (int i = 0; i < kN; ++i)
      x[size_t(i)] = std::round(ux(rng) * 256.f) / 256.f, y[size_t(i)] = uy(rng), d[size_t(i)] = ud(rng);
    run_case(c, x, y, d, gx, gy);
    for (int i = 0; i < kN; ++i) {
      const double xi = x[size_t(i)], yi = y[size_t(i)], hx = 1e-6 * std::max(1.0, std::fabs(xi)),
                   hy = 1e-6 * std::max(1.0, std::fabs(yi));
      const double want_x = d[size_t(i)] * (c.host(xi + hx, yi, i) - c.host(xi - hx, yi, i)) / (2 * hx);
      const double want_y = d[size_t(i)] * (c.host(xi, yi + hy, i) - c.host(xi, yi - hy, i)) / (2 * hy);
      INFO("element " << i << " x " << xi << " y " << yi);
      CHECK(std::fabs(gx[size_t(i)] - want_x) <= kTolF32 * std::max(1.0, std::fabs(want_x)));
      CHECK(std::fabs(gy[size_t(i)] - want_y) <= kTolF32 * std::max(1.0, std::fabs(want_y)));
    }
  }
}

TEST_CASE("vjp: shape ops and sum reductions give the transposed sums (interpreter)", "[dsl][autodiff]") {
  // out[i, j] = a[i] · b[j] + s, with s = Σ_j b[j]² a scalar broadcast to the tile, then transposed and
  // reshaped: Σ dout∘out gives ga[i] = Σ_j D[i,j] b[j] and gb[j] = Σ_i D[i,j] a[i] + 2 b[j] Σ_ij D[i,j].
  constexpr int M = 8, N = 16;
  Kernel k("vjp_shapes",
           [](Ptr<f32> A, Ptr<f32> B, Ptr<f32> D, Ptr<f32> GA, Ptr<f32> GB) {
             Tile i = arange(0, M), j = arange(0, N);
             Tile a = load(A + i), b = load(B + j);
             Tile outer = expand_dims(a, 1) * expand_dims(b, 0);  // [M, N]
             Tile s = sum(b * b, 0);                              // scalar
             Tile out = reshape(trans(outer + s), {N * M});        // [N·M], column-major of [M, N]
             Tile d = load(D + arange(0, N * M));
             store(GA + i, vjp(out, a, d));
             store(GB + j, vjp(out, b, d));
           },
           {"a", "b", "dout", "ga", "gb"});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(M), b(N), d(N * M);
  for (auto &v : a) v = u(rng);
  for (auto &v : b) v = u(rng);
  for (auto &v : d) v = u(rng);
  const Backend be = Backend::Interpreter;
  Buffer ba(M * 4, be), bb(N * 4, be), bd(N * M * 4, be), bga(M * 4, be), bgb(N * 4, be);
  ba.upload(a);
  bb.upload(b);
  bd.upload(d);
  bga.upload(std::vector<float>(M, NAN));
  bgb.upload(std::vector<float>(N, NAN));
  k.launch(Grid{1}, LaunchConfig{.backend = be}, ba, bb, bd, bga, bgb);
  auto ga = bga.download_as<float>(M), gb = bgb.download_as<float>(N);
  auto D = [&](int i, int j) { return double(d[size_t(j * M + i)]); };  // out[j·M + i] = trans(...)[j, i]
  double total = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) total += D(i, j);
  for (int i = 0; i < M; ++i) {
    double want = 0;
    for (int j = 0; j < N; ++j) want += D(i, j) * b[size_t(j)];
    CHECK(std::fabs(ga[size_t(i)] - want) <= kTolF32 * std::max(1.0, std::fabs(want)));
  }
  for (int j = 0; j < N; ++j) {
    double want = 2 * b[size_t(j)] * total;
    for (int i = 0; i < M; ++i) want += D(i, j) * a[size_t(i)];
    CHECK(std::fabs(gb[size_t(j)] - want) <= kTolF32 * std::max(1.0, std::fabs(want)));
  }
}

TEST_CASE("vjp: a value independent of wrt has zero gradient, ops without a derivative are named with their line",
          "[dsl][autodiff][errors]") {
  std::vector<float> g;
  Kernel zero("vjp_zero",
              [](Ptr<f32> X, Ptr<f32> G) {
                Tile i = arange(0, 16);
                Tile x = load(X + i), y = load(X + i + 16);
                store(G + i, vjp(y * 2.f, x, 1.f));
              },
              {"x", "g"});
  const Backend be = Backend::Interpreter;
  Buffer bx(32 * 4, be), bg(16 * 4, be);
  bx.upload(std::vector<float>(32, 1.5f));
  bg.upload(std::vector<float>(16, NAN));
  zero.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bg);
  g = bg.download_as<float>(16);
  for (float v : g) CHECK(v == 0.f);

  const int rem_line = __LINE__ + 4;
  Kernel rem("vjp_rem",
             [](Ptr<f32> X, Ptr<f32> G) {
               Tile i = arange(0, 16), x = load(X + i);
               Tile out = x % 0.75f;
               store(G + i, vjp(out, x, 1.f));
             },
             {"x", "g"});
  CHECK_THROWS_WITH(rem.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bg),
                    Contains("vjp: cannot differentiate rem") &&
                        Contains("test_autodiff.cpp:" + std::to_string(rem_line)));
  Kernel maxred("vjp_max",
                [](Ptr<f32> X, Ptr<f32> G) {
                  Tile i = arange(0, 16), x = load(X + i);
                  store(G + i, vjp(x * max(x, 0), x, 1.f));
                },
                {"x", "g"});
  CHECK_THROWS_WITH(maxred.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bg),
                    Contains("vjp: cannot differentiate reduce") && Contains("only sum reductions"));
  Kernel ints("vjp_int",
              [](Ptr<f32> X, Ptr<f32> G) {
                Tile i = arange(0, 16), x = load(X + i);
                store(G + i, vjp(x, i, 1.f));
              },
              {"x", "g"});
  CHECK_THROWS_WITH(ints.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bg), Contains("vjp: wrt must be a float tile"));
}

TEST_CASE("vjp: loads from a capture made with a gradient buffer add their gradient into it", "[dsl][autodiff]") {
  // out[i] = x[i] · t[i mod 8] + t[(i + 3) mod 8]²: d/dt[e] = Σ_{i mod 8 = e} dout·x + Σ_{(i+3) mod 8 = e} 2·dout·t[e].
  const Backend be = Backend::Interpreter;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(kN), d(kN), t(8);
  for (auto &v : x) v = u(rng);
  for (auto &v : d) v = u(rng);
  for (auto &v : t) v = u(rng);
  Buffer bx(kN * 4, be), bd(kN * 4, be), bt(8 * 4, be), bgt(8 * 4, be), bgx(kN * 4, be);
  bx.upload(x);
  bd.upload(d);
  bt.upload(t);
  for (CaptureGrads mode : {CaptureGrads::Scatter, CaptureGrads::Ignore}) {
    INFO((mode == CaptureGrads::Scatter ? "scatter" : "ignore"));
    const std::vector<float> start = {0.5f, -0.25f, 0.f, 1.f, 0.f, 0.f, 2.f, 0.f};  // accumulated into
    bgt.upload(start);
    bgx.upload(std::vector<float>(kN, NAN));
    Captured table = capture(bt, DType::f32, bgt);
    REQUIRE(table.has_grad());
    Kernel k("vjp_capture",
             [table, mode](Ptr<f32> X, Ptr<f32> D, Ptr<f32> GX) {
               Tile i = arange(0, kN);
               Tile xv = load(X + i);
               Tile a = load(table() + i % 8), c = load(table() + (i + 3) % 8);
               Tile out = xv * a + c * c;
               store(GX + i, vjp(out, xv, load(D + i), mode));
             },
             {"x", "dout", "gx"});
    k.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bd, bgx);
    auto gt = bgt.download_as<float>(8), gx = bgx.download_as<float>(kN);
    for (int e = 0; e < 8; ++e) {
      double want = start[size_t(e)];
      if (mode == CaptureGrads::Scatter)
        for (int i = 0; i < kN; ++i) {
          if (i % 8 == e) want += double(d[size_t(i)]) * x[size_t(i)];
          if ((i + 3) % 8 == e) want += 2.0 * d[size_t(i)] * t[size_t(e)];
        }
      INFO("entry " << e);
      CHECK(std::fabs(gt[size_t(e)] - want) <= kTolF32 * std::max(1.0, std::fabs(want)));
    }
    for (int i = 0; i < kN; ++i) CHECK(std::fabs(gx[size_t(i)] - double(d[size_t(i)]) * t[size_t(i % 8)]) <= 1e-6);
  }
  CHECK_THROWS_WITH(capture(bt, DType::f16, bgt), Contains("holds f32 elements, got f16"));
  Captured plain = capture(bt, DType::f32);
  CHECK_FALSE(plain.has_grad());
  CHECK_THROWS_WITH(plain.set_grad(bgt), Contains("made without a gradient buffer"));
}

TEST_CASE("vjp: control flow on the path is rejected, never differentiated to zero, a masked load's `other` gets "
          "its gradient", "[dsl][autodiff][errors]") {
  const Backend be = Backend::Interpreter;
  Buffer bx(32 * 4, be), bg(16 * 4, be);
  bx.upload(std::vector<float>(32, 0.75f));
  auto launch = [&](auto &k) { k.launch(Grid{1}, LaunchConfig{.backend = be}, bx, bg); };
  // An if_ whose condition does not depend on wrt, but whose branch does.
  Kernel branch("vjp_if",
                [](Ptr<f32> X, Ptr<f32> G) {
                  Tile i = arange(0, 16), x = load(X + i);
                  Tile r = x;
                  if_(program_id(0) >= 0, [&] { r = x * 2.f; });
                  store(G + i, vjp(r, x, 1.f));
                },
                {"x", "g"});
  CHECK_THROWS_WITH(launch(branch), Contains("vjp: cannot differentiate if") && Contains("control flow"));
  // A loop accumulating from wrt.
  Kernel loop("vjp_for",
              [](Ptr<f32> X, Ptr<f32> G) {
                Tile i = arange(0, 16), x = load(X + i);
                Tile acc = zeros({16}, DType::f32);
                for_range(0, 3, 1, [&](I32) { acc = acc + x; });
                store(G + i, vjp(acc, x, 1.f));
              },
              {"x", "g"});
  CHECK_THROWS_WITH(launch(loop), Contains("vjp: cannot differentiate for") && Contains("control flow"));
  // out computed inside a loop from a value computed outside it.
  Kernel inside("vjp_inside",
                [](Ptr<f32> X, Ptr<f32> G) {
                  Tile i = arange(0, 16), x = load(X + i);
                  Tile e = exp(x);
                  for_range(0, 1, 1, [&](I32) { store(G + i, vjp(e * 3.f, x, 1.f)); });
                },
                {"x", "g"});
  CHECK_THROWS_WITH(launch(inside), Contains("vjp: wrt comes from outside the loop being traced"));
  // load(p, mask, other = 2·x): the masked-off lanes' value is 2·x, whose gradient is 2 there, 0 elsewhere.
  Kernel other("vjp_other",
               [](Ptr<f32> X, Ptr<f32> G) {
                 Tile i = arange(0, 16), x = load(X + i);
                 Tile y = load(X + 16 + i, i < 5, x * 2.f);
                 store(G + i, vjp(y, x, 1.f));
               },
               {"x", "g"});
  bg.upload(std::vector<float>(16, NAN));
  launch(other);
  auto g = bg.download_as<float>(16);
  for (int i = 0; i < 16; ++i) CHECK(g[size_t(i)] == (i < 5 ? 0.f : 2.f));
}
