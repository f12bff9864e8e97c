// Captured kernel arguments (tilejit/capture.h) and kernel sharing between flex variants.
#include <cmath>
#include <catch2/catch.hpp>

#include "flex_reference.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("capture: buffers and scalars become kernel arguments read at launch", "[flex][capture]") {
  const int n = 64;
  auto x = random_values(n, DType::f32), t1 = random_values(n, DType::f32), t2 = random_values(n, DType::f32);
  Buffer bx(n * 4, Backend::Interpreter), bt1(n * 4, Backend::Interpreter), bt2(n * 4, Backend::Interpreter),
      out(n * 4, Backend::Interpreter);
  bx.upload(x);
  bt1.upload(t1);
  bt2.upload(t2);
  auto table = capture(bt1, DType::f32);
  auto factor = capture(2.5f);
  Kernel k("captured_axpy", [=](Ptr<f32> X, Ptr<f32> O, Constexpr<int> N) {
    auto i = arange(0, N);
    store(O + i, load(X + i) * factor() + load(table() + i));
  });
  LaunchConfig cfg{.backend = Backend::Interpreter};
  k.launch({1}, cfg, bx, out, n);
  auto got = out.download_as<float>(n);
  // x·2.5 + t1 as one fma (ir contract_fma): the product is not rounded on its own.
  for (int i = 0; i < n; ++i) REQUIRE(got[size_t(i)] == std::fma(x[size_t(i)], 2.5f, t1[size_t(i)]));
  std::string ir1 = k.ir(bx, out, n);
  REQUIRE(ir1.find("cap0") != std::string::npos);
  REQUIRE(ir1.find("cap1") != std::string::npos);

  // New values: same specialization, same IR, new results.
  table.set(bt2);
  factor.set(-1.0);
  k.launch({1}, cfg, bx, out, n);
  got = out.download_as<float>(n);
  for (int i = 0; i < n; ++i) REQUIRE(got[size_t(i)] == -x[size_t(i)] + t2[size_t(i)]);
  REQUIRE(k.num_specializations() == 1);
  REQUIRE(k.ir(bx, out, n) == ir1);
}

TEST_CASE("capture: used outside a trace, or from the wrong backend, is an error", "[flex][capture]") {
  auto c = capture(1.f);
  REQUIRE_THROWS_AS(c.tile(), TraceError);
  REQUIRE_THROWS_AS(c.set(Buffer()), Error);
  Captured empty;  // default-constructed: no value to replace
  REQUIRE_THROWS_WITH(empty.set(50.0), Catch::Contains("empty Captured") && Catch::Contains("capture(value)"));
  REQUIRE_THROWS_WITH(empty.set_int(3), Catch::Contains("empty Captured"));
  REQUIRE_THROWS_WITH(empty.set(DevicePtr{}), Catch::Contains("empty Captured"));
}

TEST_CASE("flex: lambdas that trace to the same IR share one kernel, capture values don't retrace", "[flex]") {
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 64, .seqlen_k = 64, .head_dim_qk = 32};
  attention::FlexOptions a, b;
  a.score_mod = [](Tile sc, Tile, Tile, Tile, Tile) { return sc * 0.5f; };
  b.score_mod = [](Tile sc, Tile, Tile, Tile, Tile) { return sc * 0.5f; };  // another lambda, same body
  REQUIRE(attention::flex_forward_ir(s, a) == attention::flex_forward_ir(s, b));
  attention::FlexOptions c;
  c.score_mod = [](Tile sc, Tile, Tile, Tile, Tile) { return sc * 0.25f; };
  REQUIRE(attention::flex_forward_ir(s, a) != attention::flex_forward_ir(s, c));
  // Softcap values are captured: different caps, one IR.
  a.score_mod = attention::softcap(30.f);
  b.score_mod = attention::softcap(50.f);
  REQUIRE(attention::flex_forward_ir(s, a) == attention::flex_forward_ir(s, b));
  // Window sizes are runtime arguments too (specialized, as every integer argument, only on whether they
  // are divisible by 16).
  a.mask = attention::sliding_window(16, 1);
  b.mask = attention::sliding_window(112, 3);
  REQUIRE(attention::flex_forward_ir(s, a) == attention::flex_forward_ir(s, b));
}

TEST_CASE("flex: the block-mask kernel matches the mask evaluated densely", "[flex]") {
  attention::FlexShape s{.batch = 2, .heads_q = 2, .seqlen_q = 45, .seqlen_k = 70, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  o.block_m = 16;
  o.block_n = 16;
  // Depends on b, h, q, kv; some blocks empty, some full, some partial.
  auto fn = [](int b, int h, int q, int kv) { return (kv <= q + 8 * b) && ((kv / 16 + h) % 3 != 0 || q > 30); };
  attention::Mask m([](Tile b, Tile h, Tile q, Tile kv) {
    return (kv <= q + b * 8) & (((kv / 16 + h) % 3 != 0) | (q > 30));
  });
  auto bm = attention::create_block_mask(m, s, o);
  REQUIRE(bm.num_q_blocks == 3);
  REQUIRE(bm.num_k_blocks == 5);
  auto counts = bm.counts.download_as<int>(size_t(2 * 2 * 3));
  auto lists = bm.kv_blocks.download_as<int>(size_t(2 * 2 * 3 * 5));
  int partial = 0, full = 0;
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int qb = 0; qb < 3; ++qb) {
        std::vector<int> expect;
        for (int kb = 0; kb < 5; ++kb) {
          int seen = 0, valid = 0;
          for (int q = qb * 16; q < std::min(qb * 16 + 16, 45); ++q)
            for (int kv = kb * 16; kv < std::min(kb * 16 + 16, 70); ++kv) {
              ++valid;
              seen += fn(b, h, q, kv);
            }
          if (seen) expect.push_back(kb * 2 + (seen == valid));
        }
        size_t list = size_t((b * 2 + h) * 3 + qb);
        INFO("b " << b << " h " << h << " query block " << qb);
        REQUIRE(counts[list] == int(expect.size()));
        for (size_t i = 0; i < expect.size(); ++i) {
          REQUIRE(lists[list * 5 + i] == expect[i]);
          (expect[i] & 1 ? full : partial)++;
        }
      }
  REQUIRE(full > 0);
  REQUIRE(partial > 0);
}
