// Bad inputs found by trying to break the library: each must be a clear tilejit::Error, never a crash.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "runtime/cache.h"
#include "tilejit/attention.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/kernel.h"
#include "tilejit/kernels.h"
#include "tilejit/ops.h"

using namespace tilejit;

TEST_CASE("a host buffer whose size would overflow is an error, not a tiny allocation", "[hardening]") {
  REQUIRE_THROWS_AS(Buffer(std::numeric_limits<size_t>::max() - 10, Backend::Interpreter), Error);
}

TEST_CASE("a cache entry path that is not a regular file is a miss", "[hardening]") {
  auto dir = std::filesystem::temp_directory_path() / "tilejit_hardening_cache";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "0123.ptx");  // a directory where the entry would be
  auto got = runtime::read_entry(dir.string(), "0123", "ptx");
  REQUIRE_FALSE(got.has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("attention options are validated before anything runs", "[hardening]") {
  attention::Shape s{1, 1, 64, 64, 64};
  attention::Options opt;
  opt.softmax_scale = std::nanf("");
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("softmax_scale"));
  opt.softmax_scale = -0.125f;  // the kernel takes the row max on raw scores: a negative scale would invert it
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("positive"));
  opt.softmax_scale = 0;
  opt.num_warps = 3;
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("num_warps 3"));
  opt.num_warps = 4;
  opt.num_stages = 9;
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("num_stages 9"));
  opt.num_stages = 2;
  opt.block_m = 1 << 30;
  REQUIRE_THROWS_AS(attention::check_shape(s, opt), TraceError);
}

TEST_CASE("an f16/bf16 dot for an arch without mma.sync m16n8k16 is a CompileError, not an LLVM abort", "[hardening]") {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::f16;
  for (const char *arch : {"sm_70", "sm_75"}) {
    spec.arch = arch;
    REQUIRE_THROWS_WITH(kernels::builtin_ptx("matmul", spec),
                        Catch::Contains("needs tensor cores of sm_80 or newer") && Catch::Contains(arch));
  }
  spec.dtype = DType::f32;  // the FMA path still compiles for them
  spec.arch = "sm_75";
  REQUIRE(kernels::builtin_ptx("matmul", spec).find(".entry") != std::string::npos);
}

TEST_CASE("a tile too large for a thread's registers is a CompileError naming the op and its line, not minutes in ptxas",
          "[hardening]") {
  // A [1024, 1024] f32 dot result on 4 warps: 8192 registers per thread (ptxas took minutes spilling it).
  auto k = Kernel("big_dot", [](Ptr<bf16> A, Ptr<bf16> B, Ptr<f32> C) {
    Tile r = arange(0, 1024), c = arange(0, 64);
    Tile a = load(A + r(_, None) * 64 + c(None, _)), b = load(B + c(_, None) * 1024 + r(None, _));
    store(C + r(_, None) * 1024 + r(None, _), dot(a, b));
  });
  LaunchConfig cfg;
  cfg.arch = "sm_90a";
  cfg.num_warps = 4;
  REQUIRE_THROWS_WITH(k.ptx(cfg, DevicePtr{256, 0}, DevicePtr{256, 0}, DevicePtr{256, 0}),
                      Catch::Contains("test_hardening.cpp:") && Catch::Contains("kernel 'big_dot'") &&
                          Catch::Contains("tensor<1024x1024xf32> result would take 8192 registers per thread with 4 "
                                          "warps (at most 2048") &&
                          Catch::Contains("use smaller blocks or more warps"));
}

TEST_CASE("flex options and built-in mods are validated before anything runs", "[hardening][flex]") {
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 16, .seqlen_k = 16, .head_dim_qk = 32};
  Buffer b(1 << 16, Backend::Interpreter);
  auto expect = [&](attention::FlexOptions o, const char *what) {
    o.backend = Backend::Interpreter;
    REQUIRE_THROWS_WITH(attention::flex_forward(b, b, b, b, b, s, o), Catch::Contains(what));
  };
  attention::FlexOptions o;
  for (float bad : {-1.f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    o.softmax_scale = bad;
    expect(o, "softmax_scale");
  }
  o = {};
  o.block_m = 512;
  expect(o, "BLOCK_M 512");
  o = {};
  o.num_warps = 3;
  expect(o, "num_warps 3");
  o = {};
  o.num_stages = 0;
  expect(o, "num_stages 0");
  // A mask function must return a rank ≤ 2 boolean tile.
  o = {};
  o.mask = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return reshape(q >= kv, {1, 16, 16}); });
  o.block_m = o.block_n = 16;
  o.block_mask_mode = attention::BlockMaskMode::Off;
  expect(o, "the mask function returned i1[1x16x16]");
  REQUIRE_THROWS_WITH(attention::softcap(0.f), Catch::Contains("must be finite and > 0"));
  REQUIRE_THROWS_WITH(attention::softcap(std::nanf("")), Catch::Contains("must be finite and > 0"));
  REQUIRE_THROWS_WITH(attention::alibi_slopes(-3), Catch::Contains("heads -3"));
  REQUIRE(attention::alibi_slopes(0).empty());
}
