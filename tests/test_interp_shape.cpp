// Shape ops (broadcast, expand_dims, reshape, trans, splat), arange, constants and program ids.
#include <catch2/catch.hpp>

#include "test_interp_helpers.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

TEST_CASE("broadcast stretches size-1 dims, expand_dims inserts them", "[interp][shape]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t M = 6, N = 10;
  auto col = rng.floats(M), row = rng.floats(N);
  auto bcol = buf_of(col, DType::f32), brow = buf_of(row, DType::f32);
  HostBuf out(M * N * 4);
  KernelBuilder kb;
  auto *pc = kb.param("col", P(DType::f32)), *pr = kb.param("row", P(DType::f32)), *po = kb.param("out", P(DType::f32));
  auto *c = kb.load(kb.tile_ptrs(pc, {M}));
  auto *r = kb.load(kb.tile_ptrs(pr, {N}));
  ir::Attrs ax1, ax0;
  ax1.axis = 1;
  ax0.axis = 0;
  auto *c2 = kb.op(K::ExpandDims, {c}, T({M, 1}, DType::f32), ax1);  // [M,1]
  auto *r2 = kb.op(K::ExpandDims, {r}, T({1, N}, DType::f32), ax0);  // [1,N]
  auto *cb = kb.op(K::Broadcast, {c2}, T({M, N}, DType::f32));
  auto *rb = kb.op(K::Broadcast, {r2}, T({M, N}, DType::f32));
  auto *s = kb.op(K::Sub, {cb, rb}, T({M, N}, DType::f32));
  kb.store(kb.tile_ptrs(po, {M, N}), s);
  interp::run(kb.fn, Grid{}, {bcol.arg(), brow.arg(), out.arg()});
  auto got = out.as<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) REQUIRE(got[size_t(i * N + j)] == col[size_t(i)] - row[size_t(j)]);
}

TEST_CASE("trans permutes dimensions, reshape keeps row-major order", "[interp][shape]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t A = 3, B = 4, C = 5;
  std::vector<int32_t> x(A * B * C);
  for (auto &v : x) v = int32_t(rng.integer(-1000, 1000));
  auto bx = HostBuf::of(x);
  SECTION("2-D transpose") {
    HostBuf out(A * B * C * 4);
    KernelBuilder kb;
    auto *px = kb.param("x", P(DType::i32)), *po = kb.param("out", P(DType::i32));
    auto *t = kb.load(kb.tile_ptrs(px, {A * B, C}));
    ir::Attrs perm;
    perm.ints = {1, 0};
    auto *tt = kb.op(K::Trans, {t}, T({C, A * B}, DType::i32), perm);
    kb.store(kb.tile_ptrs(po, {C, A * B}), tt);
    interp::run(kb.fn, Grid{}, {bx.arg(), out.arg()});
    auto got = out.as<int32_t>();
    for (int64_t i = 0; i < A * B; ++i)
      for (int64_t j = 0; j < C; ++j) REQUIRE(got[size_t(j * A * B + i)] == x[size_t(i * C + j)]);
  }
  SECTION("3-D permutation (2, 0, 1) then reshape to 2-D") {
    HostBuf out(A * B * C * 4);
    KernelBuilder kb;
    auto *px = kb.param("x", P(DType::i32)), *po = kb.param("out", P(DType::i32));
    auto *t = kb.load(kb.tile_ptrs(px, {A, B, C}));
    ir::Attrs perm;
    perm.ints = {2, 0, 1};  // result dim i = source dim perm[i]: result [C, A, B]
    auto *tt = kb.op(K::Trans, {t}, T({C, A, B}, DType::i32), perm);
    auto *flat = kb.op(K::Reshape, {tt}, T({C, A * B}, DType::i32));
    kb.store(kb.tile_ptrs(po, {C, A * B}), flat);
    interp::run(kb.fn, Grid{}, {bx.arg(), out.arg()});
    auto got = out.as<int32_t>();
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) REQUIRE(got[size_t((c * A + a) * B + b)] == x[size_t((a * B + b) * C + c)]);
  }
}

TEST_CASE("constants and splat are rounded to their dtype, arange counts from start", "[interp][shape]") {
  HostBuf out(8 * 2), ints(8 * 4);
  KernelBuilder kb;
  auto *po = kb.param("out", P(DType::bf16)), *pi = kb.param("ints", P(DType::i32));
  auto *s = kb.param("s", T({}, DType::f32));
  auto *c = kb.const_f(1.0 + 0x1p-8 + 0x1p-20, T({4}, DType::bf16));  // just above a tie: rounds up
  auto *sp = kb.op(K::Cast, {kb.splat(s, {4})}, T({4}, DType::bf16));
  auto *both = kb.op(K::Add, {c, sp}, T({4}, DType::bf16));
  kb.store(kb.tile_ptrs(po, {4}), c);
  kb.store(kb.tile_ptrs(po, {4}, 4), both);
  kb.store(kb.tile_ptrs(pi, {8}), kb.arange(5, 13));
  interp::run(kb.fn, Grid{}, {out.arg(), ints.arg(), float_arg(2.0)});
  auto v = values_of(out, DType::bf16);
  for (int i = 0; i < 4; ++i) {
    CHECK(v[size_t(i)] == 1.0 + 0x1p-7);
    CHECK(v[size_t(4 + i)] == 3.0);  // 3.0078125 is a tie between 3.0 and 3.015625 (spacing 2^-6): even → 3.0
  }
  auto iv = ints.as<int32_t>();
  for (int i = 0; i < 8; ++i) CHECK(iv[size_t(i)] == 5 + i);
}

TEST_CASE("programs run z outermost, x innermost, program_id and num_programs", "[interp][shape]") {
  const Grid g{3, 2, 2};
  HostBuf counter(4), order(g.size() * 4), sizes(3 * 4);
  KernelBuilder kb;
  auto *pc = kb.param("counter", P(DType::i32)), *po = kb.param("order", P(DType::i32)),
       *ps = kb.param("sizes", P(DType::i32));
  auto *x = kb.program_id(0), *y = kb.program_id(1), *z = kb.program_id(2);
  auto i32 = T({}, DType::i32);
  ir::Attrs a0, a1, a2;
  a1.axis = 1, a2.axis = 2;
  auto *nx = kb.op(K::NumPrograms, {}, i32, a0), *ny = kb.op(K::NumPrograms, {}, i32, a1);
  auto *nz = kb.op(K::NumPrograms, {}, i32, a2);
  // linear = x + nx * (y + ny * z); order[linear] = atomic_add(counter, 1)
  auto *lin = kb.op(K::Add, {x, kb.op(K::Mul, {nx, kb.op(K::Add, {y, kb.op(K::Mul, {ny, z}, i32)}, i32)}, i32)}, i32);
  auto *old = kb.op(K::AtomicAdd, {pc, kb.const_i(1, i32)}, i32);
  kb.store(kb.op(K::PtrAdd, {po, lin}, P(DType::i32)), old);
  kb.store(kb.op(K::PtrAdd, {ps, kb.const_i(0, i32)}, P(DType::i32)), nx);
  kb.store(kb.op(K::PtrAdd, {ps, kb.const_i(1, i32)}, P(DType::i32)), ny);
  kb.store(kb.op(K::PtrAdd, {ps, kb.const_i(2, i32)}, P(DType::i32)), nz);
  (void)nz;
  interp::run(kb.fn, g, {counter.arg(), order.arg(), sizes.arg()});
  auto ord = order.as<int32_t>();
  for (size_t i = 0; i < ord.size(); ++i) CHECK(ord[i] == int32_t(i));
  CHECK(counter.as<int32_t>()[0] == int32_t(g.size()));
  CHECK(sizes.as<int32_t>() == std::vector<int32_t>{3, 2, 2});
}
