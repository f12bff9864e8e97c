// Misuse that once crashed, hung or computed garbage: each is now a clear tilejit::Error.
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.h"
#include "tilejit/tilejit.h"

using namespace tilejit;
using Catch::Contains;

TEST_CASE("a Tile kept past its trace is a TraceError, not a use-after-free", "[dsl][hardening]") {
  static std::optional<Tile> kept;
  auto k = Kernel("keep", [](Ptr<f32> out, Constexpr<int> N) {
    auto t = arange(0, 16).to(DType::f32);
    if (!kept) kept = t;  // escapes the first trace
    store(out + arange(0, 16), *kept + float(N));
  });
  REQUIRE_NOTHROW(k.function(DevicePtr{}, 1));
  REQUIRE_THROWS_WITH(k.function(DevicePtr{}, 2), Contains("a Tile from an earlier trace was used"));
  kept.reset();
}

TEST_CASE("launching a kernel from inside a kernel body is an error, not a deadlock", "[dsl][hardening]") {
  std::function<void()> inner;
  auto k = Kernel("outer", [&](Ptr<f32> out, Constexpr<int> N) {
    if (N == 1) inner();
    store(out + arange(0, 16), zeros({16}, DType::f32));
  });
  inner = [&] { k.function(DevicePtr{}, 2); };
  REQUIRE_THROWS_WITH(k.function(DevicePtr{}, 1), Contains("cannot be launched or traced from inside a kernel body"));
  REQUIRE_NOTHROW(k.function(DevicePtr{}, 2));  // the failed trace left nothing locked
}

TEST_CASE("integer constants must fit their dtype, float constants are rounded to theirs", "[dsl][hardening]") {
  auto overflow = Kernel("i8_300", [](Ptr<i8> out) { store(out + arange(0, 16), full({16}, 300, DType::i8)); });
  REQUIRE_THROWS_WITH(overflow.function(DevicePtr{}), Contains("constant 300 does not fit i8"));

  auto compare = Kernel("i8_cmp", [](Ptr<i8> in, Ptr<i1> out) {
    auto x = load(in + arange(0, 16));
    store(out + arange(0, 16), x == 300);
  });
  REQUIRE_THROWS_WITH(compare.function(DevicePtr{}, DevicePtr{}), Contains("does not fit i8"));

  // 0.1 is stored as the f32 nearest to it, so comparing with a loaded 0.1f is true on every backend.
  auto rounded = Kernel("f32_const", [](Ptr<f32> out) { store(out + arange(0, 16), full({16}, 0.1, DType::f32)); });
  const ir::Function &fn = rounded.function(DevicePtr{});
  bool found = false;
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Constant && op.result()->type.dtype() == DType::f32 && op.attrs.fvalue != 0) {
      CHECK(op.attrs.fvalue == double(0.1f));
      found = true;
    }
  });
  REQUIRE(found);
}

TEST_CASE("an int literal beyond i32 widens the comparison to i64", "[dsl][hardening]") {
  std::vector<uint8_t> out(16, 7);
  auto k = Kernel("wide", [](Ptr<i1> o) { store(o + arange(0, 16), arange(0, 16) < int64_t(3000000000)); });
  k.launch(Grid{1}, LaunchConfig{.backend = Backend::Interpreter}, DevicePtr{uint64_t(uintptr_t(out.data())), 16});
  for (auto v : out) REQUIRE(v == 1);
}

TEST_CASE("for_range with a literal step that is not positive is a TraceError", "[dsl][hardening]") {
  auto k = Kernel("steps", [](Ptr<f32> out, Constexpr<int> STEP) {
    auto acc = zeros({16}, DType::f32);
    for_range(0, 10, int(STEP), [&](I32) { acc = acc + 1.f; });
    store(out + arange(0, 16), acc);
  });
  REQUIRE_THROWS_WITH(k.function(DevicePtr{}, 0), Contains("step must be positive, got 0"));
  REQUIRE_THROWS_WITH(k.function(DevicePtr{}, -1), Contains("step must be positive, got -1"));
}

TEST_CASE("launch limits are the same on the interpreter as on the GPU", "[dsl][hardening]") {
  std::vector<float> out(16);
  auto k = Kernel("z", [](Ptr<f32> o) { store(o + arange(0, 16), zeros({16}, DType::f32)); });
  auto run = [&](LaunchConfig cfg, Grid g = Grid{1}) {
    cfg.backend = Backend::Interpreter;
    k.launch(g, cfg, out.data());
  };
  REQUIRE_THROWS_WITH(run(LaunchConfig{.num_warps = 3}), Contains("num_warps must be a power of two"));
  REQUIRE_THROWS_WITH(run(LaunchConfig{.num_warps = 0}), Contains("num_warps must be a power of two"));
  REQUIRE_THROWS_WITH(run(LaunchConfig{.num_warps = 4, .num_stages = -7}), Contains("num_stages must be in [1, 8]"));
  REQUIRE_THROWS_WITH(run(LaunchConfig{}, Grid{1, 70000, 1}), Contains("exceeds the limit of 65535"));
  REQUIRE_NOTHROW(run(LaunchConfig{}));
}

TEST_CASE("a tile over 2^20 elements is a TraceError naming the op and the user's line", "[dsl][hardening]") {
  auto huge_full = Kernel("huge_full", [](Ptr<f32> out) {
    auto z = zeros({1 << 16, 1 << 16}, DType::f32);  // throws here
    store(out + arange(0, 16), arange(0, 16).to(DType::f32));
  });
  REQUIRE_THROWS_WITH(huge_full.function(DevicePtr{}),
                      Contains("constant: a tensor<65536x65536xf32> tile has 4294967296 elements") &&
                          Contains("test_dsl_hardening.cpp"));
  auto outer = Kernel("outer", [](Ptr<f32> out) {  // each operand is fine; their broadcast product is not
    auto a = arange(0, 2048).to(DType::f32);
    store(out + arange(0, 2048), max(a(_, None) * a(None, _), 1));
  });
  REQUIRE_THROWS_WITH(outer.function(DevicePtr{}), Contains("has 4194304 elements; a tile holds at most 2^20"));
  auto fine = Kernel("fine", [](Ptr<f32> out) {  // exactly 2^20 is allowed
    auto a = arange(0, 1024).to(DType::f32);
    store(out + arange(0, 1024), max(a(_, None) * a(None, _), 1));
  });
  REQUIRE_NOTHROW(fine.function(DevicePtr{}));
}
