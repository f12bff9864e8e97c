// convert_before_broadcast: which integer-to-f32 conversions move before the broadcast (in the IR), and that the
// results stay bit for bit those of the conversion per element, on the interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "text_matches.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;

using testing::count_matches;

TEST_CASE("convert_before_broadcast: |q − kv| of clamped row and column positions converts per row and column",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> out = param(0);
        I32 n = param(1);
        Tile r = arange(0, 8), k = arange(0, 16);
        // Positions clamped into [0, 2^24 − 1] (as the flex kernels hand them to mods), and unclamped ones.
        Tile q = minimum(maximum(n + r, 0), (1 << 24) - 1)(_, None), kv = minimum(maximum(n - k, 0), (1 << 24) - 1)(None, _);
        Tile small = abs(q - kv).to(DType::f32) + (q + 3).to(DType::f32);
        Tile wide = abs((n + r)(_, None) - k(None, _)).to(DType::f32);  // n + r may be anything: stays
        store(out + (r * 16)(_, None) + k(None, _), small + wide);
      },
      {P(DType::f32), S(DType::i32)});
  ir::optimize(*fn);
  const std::string ir = ir::print(*fn);
  INFO(ir);
  // Conversions of the 8 rows and 16 columns, of the constant 3, and the unclamped difference's per element.
  CHECK(count_matches(ir, R"(= cast %\d+ : tensor<8xi32> -> tensor<8xf32>)") == 1);
  CHECK(count_matches(ir, R"(= cast %\d+ : tensor<16xi32> -> tensor<16xf32>)") == 1);
  CHECK(count_matches(ir, R"(= cast %\d+ : tensor<8x16xi32> -> tensor<8x16xf32>)") == 1);
  CHECK(count_matches(ir, R"(= abs %\d+ : tensor<8x16xf32>)") == 1);
  CHECK(count_matches(ir, R"(= abs %\d+ : tensor<8x16xi32>)") == 1);
  CHECK_NOTHROW(ir::verify(*fn));
}

TEST_CASE("convert_before_broadcast: results bit for bit those of the per-element conversion, at 2^24 and INT_MIN",
          "[ir][passes]") {
  // Rows and columns near ±2^24 (clamped there, so the rewrite applies) and an unclamped INT_MIN row.
  constexpr int R = 8, C = 16;
  auto kern = Kernel("positions", [](Ptr<i32> rows, Ptr<i32> cols, Ptr<f32> out) {
    Tile r = arange(0, R), c = arange(0, C);
    constexpr int kLimit = 1 << 24;
    Tile q = minimum(maximum(load(rows + r), -kLimit), kLimit)(_, None);
    Tile kv = minimum(maximum(load(cols + c), -kLimit), kLimit)(None, _);
    Tile at = (r * C)(_, None) + c(None, _);
    store(out + at, abs(q - kv).to(DType::f32));
    store(out + R * C + at, (q + kv).to(DType::f32));
    store(out + 2 * R * C + at, abs(load(rows + r)(_, None) + c(None, _) * 0).to(DType::f32));  // INT_MIN: stays
  });
  std::vector<int32_t> rows{0, 1, -5, (1 << 24), -(1 << 24), (1 << 24) - 3, 123456, int32_t(0x80000000)};
  std::vector<int32_t> cols(C);
  for (int i = 0; i < C; ++i) cols[size_t(i)] = (i % 2 ? -1 : 1) * ((1 << 24) - i * 7919);
  Buffer br(R * 4, Backend::Interpreter), bc(C * 4, Backend::Interpreter), bo(3 * R * C * 4, Backend::Interpreter);
  br.upload(rows);
  bc.upload(cols);
  bo.fill_bytes(0xff);
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  kern.launch(Grid{1}, cfg, br, bc, bo);
  const std::vector<float> got = bo.download_as<float>(3 * R * C);
  auto clamp = [](int64_t v) { return std::min<int64_t>(std::max<int64_t>(v, -(1 << 24)), 1 << 24); };
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      const int64_t q = clamp(rows[size_t(i)]), kv = clamp(cols[size_t(j)]);
      INFO("row " << i << ", column " << j);
      CHECK(got[size_t(i * C + j)] == float(std::llabs(q - kv)));
      CHECK(got[size_t(R * C + i * C + j)] == float(q + kv));
      // i32 |INT_MIN| wraps to INT_MIN: −2^31 as the per-element conversion gives it.
      const int32_t wrapped = rows[size_t(i)] == INT32_MIN ? INT32_MIN : std::abs(rows[size_t(i)]);
      CHECK(got[size_t(2 * R * C + i * C + j)] == float(wrapped));
    }
}
