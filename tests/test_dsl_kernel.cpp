// Kernel: parameter deduction, argument binding, specialization keys and the trace cache, launch dispatch,
// and an end-to-end vector add on the CPU interpreter.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "ir/ir.h"
#include "tilejit/tilejit.h"

using namespace tilejit;
using Catch::Contains;

namespace {

auto make_add() {
  return Kernel(
      "add",
      [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto mask = offs < n;
        store(out + offs, load(x + offs, mask, 0.f) + load(y + offs, mask, 0.f), mask);
      },
      {"x", "y", "out", "n", "BLOCK"});
}

}  // namespace

TEST_CASE("Kernel: parameters become IR params with names and specialization bits", "[dsl][kernel]") {
  auto add = make_add();
  const ir::Function &fn = add.function(DevicePtr{256}, DevicePtr{512}, DevicePtr{1028}, 64, 128);
  REQUIRE(fn.params.size() == 4);  // the constexpr is not a runtime parameter
  CHECK(fn.name == "add");
  CHECK(fn.params[0].name == "x");
  CHECK(fn.params[0].type.is_ptr());
  CHECK(fn.params[0].type.dtype() == DType::f32);
  CHECK(fn.params[0].align16);
  CHECK_FALSE(fn.params[2].align16);  // 1028 % 16 != 0
  CHECK(fn.params[3].name == "n");
  CHECK(fn.params[3].type.dtype() == DType::i32);
  CHECK(fn.params[3].div16);
  CHECK(fn.body->args.size() == 4);
  CHECK(fn.body->arg(3)->name == "n");
  bool has_arange_128 = false;
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Arange) has_arange_128 = op.attrs.ints == std::vector<int64_t>{0, 128};
  });
  CHECK(has_arange_128);
  CHECK(add.core().param_name(4) == "BLOCK");
}

TEST_CASE("Kernel: specialization keys select cached traces", "[dsl][kernel]") {
  auto add = make_add();
  DevicePtr aligned{4096}, unaligned{4100};
  const ir::Function &f1 = add.function(aligned, aligned, aligned, 1024, 256);
  CHECK(add.num_specializations() == 1);
  const ir::Function &f2 = add.function(DevicePtr{8192}, aligned, aligned, 2048, 256);  // same key
  CHECK(&f1 == &f2);
  CHECK(add.num_specializations() == 1);
  const ir::Function &f3 = add.function(unaligned, aligned, aligned, 1024, 256);  // alignment differs
  CHECK(&f3 != &f1);
  CHECK_FALSE(f3.params[0].align16);
  CHECK(add.num_specializations() == 2);
  const ir::Function &f4 = add.function(aligned, aligned, aligned, 1000, 256);  // n not divisible by 16
  CHECK_FALSE(f4.params[3].div16);
  CHECK(add.num_specializations() == 3);
  add.function(aligned, aligned, aligned, 1024, 512);  // constexpr value differs
  CHECK(add.num_specializations() == 4);
  add.function(aligned, aligned, aligned, 4096, 512);  // same key as the previous one
  CHECK(add.num_specializations() == 4);
}

TEST_CASE("Kernel: a parameter the traced body never uses enters no specialization key", "[dsl][kernel]") {
  // `unused_n` and `unused_p` have no use after tracing: their divisibility / alignment must not split the cache.
  Kernel k(
      "copy_with_unused",
      [](Ptr<f32> x, Ptr<f32> out, Ptr<f32> unused_p, I32 n, I32 unused_n, Constexpr<int> BLOCK) {
        auto offs = arange(0, BLOCK);
        store(out + offs, load(x + offs, offs < n, 0.f), offs < n);
      },
      {"x", "out", "unused_p", "n", "unused_n", "BLOCK"});
  DevicePtr a{4096};
  const ir::Function &f1 = k.function(a, a, DevicePtr{4096}, 64, 16, 64);
  const ir::Function &f2 = k.function(a, a, DevicePtr{4100}, 64, 17, 64);  // only unused values differ
  CHECK(&f1 == &f2);
  CHECK(k.num_specializations() == 1);
  CHECK_FALSE(f1.params[2].align16);  // nothing is assumed of unused parameters
  CHECK_FALSE(f1.params[4].div16);
  CHECK(f1.params[3].div16);          // n is used: specialized
  k.function(a, a, a, 65, 16, 64);    // n's divisibility is part of the key
  CHECK(k.num_specializations() == 2);
}

TEST_CASE("Kernel: do_not_specialize keeps a parameter's value out of the key", "[dsl][kernel]") {
  auto body = [](Ptr<f32> x, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {
    auto offs = arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n, 0.f), offs < n);
  };
  Kernel k("copy_n", body, {"x", "out", "n", "BLOCK"}, KernelOptions{.do_not_specialize = {"n", "x"}});
  for (int n : {1, 3, 8, 16, 17, 113, 128, 1000}) k.function(DevicePtr{uint64_t(4096 + 4 * n)}, DevicePtr{4096}, n, 64);
  CHECK(k.num_specializations() == 1);
  const ir::Function &f = k.function(DevicePtr{4096}, DevicePtr{4096}, 16, 64);
  CHECK_FALSE(f.params[2].div16);
  CHECK_FALSE(f.params[0].align16);
  CHECK(f.params[1].align16);
  // The kernel still computes the right thing for every length (interpreter).
  std::vector<float> host(64);
  for (int i = 0; i < 64; ++i) host[size_t(i)] = float(i) + 0.5f;
  for (int n : {3, 16, 17}) {
    Buffer x(64 * 4, Backend::Interpreter), out(64 * 4, Backend::Interpreter);
    x.upload(host);
    out.upload(std::vector<float>(64, -7.f));  // poison
    k.launch(Grid{1}, LaunchConfig{.backend = Backend::Interpreter}, x, out, n, 64);
    auto got = out.download_as<float>(64);
    for (int i = 0; i < 64; ++i) REQUIRE(got[size_t(i)] == (i < n ? host[size_t(i)] : -7.f));
  }
  CHECK_THROWS_WITH(Kernel("bad", body, {"x", "out", "n", "BLOCK"}, KernelOptions{.do_not_specialize = {"m"}}),
                    Contains("Kernel bad: do_not_specialize names 'm', which is not a parameter"));
  CHECK_THROWS_WITH(Kernel("bad", body, {"x", "out", "n", "BLOCK"}, KernelOptions{.do_not_specialize = {"BLOCK"}}),
                    Contains("'BLOCK', a Constexpr<int> parameter"));
  // Names must be distinct and non-empty, so that do_not_specialize (and errors) name one parameter.
  CHECK_THROWS_WITH(Kernel("bad", body, {"x", "x", "n", "BLOCK"}), Contains("parameters 0 and 1 are both named 'x'"));
  CHECK_THROWS_WITH(Kernel("bad", body, {"x", "out", "", "BLOCK"}), Contains("parameter 2 has an empty name"));
}

TEST_CASE("Kernel: detail::param_tile hands out a constexpr parameter's value as a weak literal", "[dsl][kernel]") {
  // Generic kernels (a ParamTable read by index) take every parameter through param_tile, constexprs included.
  Kernel k(
      "constexpr_params",
      [](Ptr<f32> out, Constexpr<int64_t>, Constexpr<float>, Constexpr<bool>, I32 n) {
        const Tile big = detail::param_tile(1), f = detail::param_tile(2), flag = detail::param_tile(3);
        REQUIRE((big.is_literal() && f.is_literal() && flag.is_literal()));
        auto offs = arange(0, 16);
        // big − 2^33 + 5 in 64-bit, then to f32; f keeps out's f32; flag selects; n is a runtime scalar.
        Tile v = where(offs == 0, (big.to(DType::i64) - (int64_t(1) << 33) + 5).to(DType::f32),
                       where(offs == 1, f * 2.f, where(offs == 2, where(flag, 1.f, -1.f), detail::param_tile(4).to(DType::f32))));
        store(out + offs, v);
      },
      {"out", "big", "f", "flag", "n"});
  for (bool flag : {true, false}) {
    Buffer out(16 * 4, Backend::Interpreter);
    out.upload(std::vector<float>(16, -7.f));  // poison
    k.launch(Grid{1}, LaunchConfig{.backend = Backend::Interpreter}, out, (int64_t(1) << 33) + 2, 0.375f, flag, 9);
    auto got = out.download_as<float>(16);
    CHECK(got[0] == 7.f);
    CHECK(got[1] == 0.75f);
    CHECK(got[2] == (flag ? 1.f : -1.f));
    CHECK(got[3] == 9.f);
  }
  Kernel bad("one_param", [](Ptr<f32> out) { store(out + arange(0, 16), detail::param_tile(3).to(DType::f32)); },
             {"out"});
  CHECK_THROWS_WITH(bad.function(DevicePtr{4096}), Contains("kernel one_param: parameter 3 requested; it has 1"));
}

TEST_CASE("Kernel: argument binding errors name the kernel, index and parameter", "[dsl][kernel][errors]") {
  auto add = make_add();
  DevicePtr p{0};
  CHECK_THROWS_WITH(add.function(p, p, p, 16),
                    Contains("kernel add: expected 5 arguments") && Contains("I32 n") && Contains("got 4"));
  CHECK_THROWS_WITH(add.function(p, p, p, p, 16), Contains("kernel add: argument 3 (n, I32) needs an integer, got a pointer"));
  CHECK_THROWS_WITH(add.function(p, 5, p, 16, 16), Contains("kernel add: argument 1 (y, Ptr<f32>) needs a Buffer, DevicePtr or pointer"));
  CHECK_THROWS_WITH(add.function(p, p, p, int64_t(1) << 40, 16), Contains("argument 3 (n, I32)") && Contains("does not fit i32"));
  std::vector<int32_t> ints(16);
  CHECK_THROWS_WITH(add.function(ints.data(), p, p, 16, 16), Contains("argument 0 (x, Ptr<f32>) got a host pointer to i32 elements"));
  CHECK_THROWS_WITH(add.function(p, p, p, 16, 2.5), Contains("argument 4 (BLOCK, Constexpr<int>) needs an integer"));
  CHECK_THROWS_AS((Kernel("named", [](I32) {}, {"a", "b"})), Error);
  // Default names.
  auto k = Kernel("unnamed", [](Ptr<f16> a, F32 s) {});
  CHECK_THROWS_WITH(k.function(DevicePtr{}, DevicePtr{}), Contains("argument 1 (arg1, F32) needs a number"));
  CHECK(k.function(DevicePtr{}, 2).params[1].type.dtype() == DType::f32);
}

TEST_CASE("Kernel: trace errors carry the kernel body's line", "[dsl][kernel][errors]") {
  const int line = __LINE__ + 2;
  auto bad = Kernel("bad", [](Ptr<bf16> p) {
    store(p + arange(0, 16), zeros({16}, DType::f32));
  });
  CHECK_THROWS_WITH(bad.function(DevicePtr{}), Contains("store:") && Contains("test_dsl_kernel.cpp:" + std::to_string(line)));
  CHECK(bad.num_specializations() == 0);  // a failed trace is not cached
}

TEST_CASE("Kernel: launches of an empty grid do nothing, ptx needs an arch", "[dsl][kernel]") {
  auto add = make_add();
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  REQUIRE_NOTHROW(add.launch(Grid{0, 1, 1}, cfg, DevicePtr{}, DevicePtr{}, DevicePtr{}, 0, 64));
  CHECK(add.num_specializations() == 0);
  CHECK_THROWS_WITH(add.ptx(LaunchConfig{}, DevicePtr{}, DevicePtr{}, DevicePtr{}, 0, 64), Contains("needs LaunchConfig::arch"));
}

TEST_CASE("Kernel: vector add end to end on the interpreter", "[dsl][kernel][interp]") {
  auto add = make_add();
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  for (int n : {1000, 1024, 37}) {
    std::vector<float> x(n), y(n), out(n, -777.f);
    for (int i = 0; i < n; ++i) {
      x[i] = dist(rng);
      y[i] = dist(rng);
    }
    const int block = 256;
    LaunchConfig cfg;
    cfg.backend = Backend::Interpreter;
    // DevicePtr with sizes, so the interpreter checks bounds (the tail is masked).
    auto dp = [](std::vector<float> &v) { return DevicePtr{uint64_t(uintptr_t(v.data())), v.size() * sizeof(float)}; };
    add.launch(Grid{uint32_t(cdiv(n, block))}, cfg, dp(x), dp(y), dp(out), n, block);
    for (int i = 0; i < n; ++i) REQUIRE(out[i] == x[i] + y[i]);  // f32 add: exact
    // Raw host pointers work too.
    std::vector<float> out2(n, 0.f);
    add.launch(Grid{uint32_t(cdiv(n, block))}, cfg, x.data(), y.data(), out2.data(), n, block);
    CHECK(out2 == out);
  }
  CHECK(add.ir(DevicePtr{}, DevicePtr{}, DevicePtr{}, 16, 64).find("arange") != std::string::npos);
}
