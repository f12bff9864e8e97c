// load / store / atomic_add: bounds and alignment checks (message content), masks, other, dtype layouts.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>

#include "test_interp_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

namespace {

}  // namespace

TEST_CASE("an out-of-bounds load names the element, address, argument and program", "[interp][memory]") {
  // Program 1 reads element [3, 17] of a 64x64 tile at 8 bytes past the end of argument 2 ('x', 4096 bytes);
  // every other element (and all of program 0) stays inside.
  HostBuf a0(16), a1(16), a2(4096), out(64 * 64 * 4);
  KernelBuilder kb;
  kb.param("a0", P(DType::f32));
  kb.param("a1", P(DType::f32));
  auto *px = kb.param("x", P(DType::f32)), *po = kb.param("out", P(DType::f32));
  auto t64 = T({64, 64}, DType::i32);
  auto *lin = kb.op(K::Reshape, {kb.arange(0, 64 * 64)}, t64);
  auto *hit = kb.cmp(ir::CmpPred::eq, lin, kb.const_i(3 * 64 + 17, t64));
  auto *pid1 = kb.cmp(ir::CmpPred::eq, kb.splat(kb.program_id(0), {64, 64}), kb.const_i(1, t64));
  auto *bad = kb.op(K::And, {hit, pid1}, T({64, 64}, DType::i1));
  auto *offs = kb.op(K::Select, {bad, kb.const_i(1026, t64), kb.op(K::Rem, {lin, kb.const_i(1024, t64)}, t64)}, t64);
  kb.line = 77;
  auto *v = kb.load(kb.ptrs(px, offs));
  kb.line = 78;
  kb.store(kb.tile_ptrs(po, {64, 64}), v);
  const std::string m = interp_error(kb.fn, Grid{2, 1, 1}, {a0.arg(), a1.arg(), a2.arg(), out.arg()});
  INFO(m);
  CHECK_THAT(m, Catch::StartsWith("load at kernels/x.cpp:77: out-of-bounds access at element [3, 17] of the 64x64 tile: address 0x"));
  CHECK_THAT(m, Catch::Contains(fmt::format("{:#x} is", a2.addr() + 4096 + 8)));
  CHECK_THAT(m, Catch::EndsWith("is 8 bytes past the end of argument 2 ('x') (4096 bytes), program_id (1, 0, 0)"));
}

TEST_CASE("stores and atomics are checked too, before-start, straddling and misaligned accesses", "[interp][memory]") {
  HostBuf buf(64);
  auto make = [](K kind, int64_t off, DType d = DType::f32) {
    auto kb = std::make_unique<KernelBuilder>();
    auto *p = kb->param("p", P(d));
    auto *ptr = kb->op(K::PtrAdd, {p, kb->const_i(off, s32())}, P(d));
    if (kind == K::Store) kb->store(ptr, kb->const_f(1.0, T({}, d)));
    else kb->op(K::AtomicAdd, {ptr, kb->const_f(1.0, T({}, d))}, T({}, d));
    return kb;
  };
  auto kb = make(K::Store, 16);
  std::string m = interp_error(kb->fn, Grid{}, {buf.arg()});
  CHECK_THAT(m, Catch::Contains("store at kernels/x.cpp:12: out-of-bounds access at element [] of the scalar tile"));
  CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('p') (64 bytes)"));
  kb = make(K::AtomicAdd, -2);
  m = interp_error(kb->fn, Grid{}, {buf.arg()});
  CHECK_THAT(m, Catch::Contains("atomic_add at"));
  CHECK_THAT(m, Catch::Contains("is 8 bytes before the start of argument 0 ('p') (64 bytes)"));
  // A 62-byte argument: the f32 at byte 60 would read 2 bytes past the end.
  KernelArg short_arg = buf.arg();
  short_arg.bytes = 62;
  kb = make(K::Store, 15);
  m = interp_error(kb->fn, Grid{}, {short_arg});
  CHECK_THAT(m, Catch::Contains("starts 2 bytes before the end of argument 0 ('p') (62 bytes) but the element is 4 bytes long"));
  // A pointer argument that is not 4-byte aligned.
  KernelArg skewed = buf.arg();
  skewed.ptr += 2;
  skewed.bytes -= 2;
  kb = make(K::Store, 0);
  m = interp_error(kb->fn, Grid{}, {skewed});
  CHECK_THAT(m, Catch::Contains("is not aligned to the 4-byte element size"));
  // Unchecked arguments (bytes == 0) accept any address but the null page.
  kb = make(K::Store, 15);
  CHECK_NOTHROW(interp::run(kb->fn, Grid{}, {buf.arg(false)}));
  CHECK(buf.as<float>()[15] == 1.0f);
  KernelArg null_arg;
  null_arg.kind = KernelArg::Kind::Ptr;
  m = interp_error(kb->fn, Grid{}, {null_arg});
  CHECK_THAT(m, Catch::Contains("is a null pointer plus an offset"));
}

TEST_CASE("masked-off lanes never touch memory, load gives other there", "[interp][memory]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t B = 64, n = 50;
  auto x = rng.floats(n);
  auto bx = buf_of(x, DType::f32);  // exactly n elements: lanes >= n would be out of bounds
  HostBuf out(n * 4), out_default(n * 4);
  KernelBuilder kb;
  auto *px = kb.param("x", P(DType::f32)), *po = kb.param("out", P(DType::f32)), *pn = kb.param("n", s32());
  auto *po2 = kb.param("out2", P(DType::f32));
  auto *offs = kb.arange(0, B);
  auto *mask = kb.cmp(ir::CmpPred::lt, offs, kb.splat(pn, {B}));
  auto *v = kb.load(kb.ptrs(px, offs), mask, kb.const_f(-1.5, T({B}, DType::f32)));
  auto *v0 = kb.load(kb.ptrs(px, offs), mask);
  // The masked-off lanes' loaded values are checked through a reduce over them (they cannot be stored).
  kb.store(kb.ptrs(po, offs), v, mask);
  kb.store(kb.ptrs(po2, offs), v0, mask);
  ir::Attrs sum;
  sum.reduce = ir::ReduceKind::sum;
  auto *inv = kb.op(K::Not, {mask}, T({B}, DType::i1));
  auto *tail = kb.op(K::Select, {inv, v, kb.const_f(0.0, T({B}, DType::f32))}, T({B}, DType::f32));
  auto *tail_sum = kb.op(K::Reduce, {tail}, T({}, DType::f32), sum);
  auto *tail0 = kb.op(K::Select, {inv, v0, kb.const_f(0.0, T({B}, DType::f32))}, T({B}, DType::f32));
  auto *tail0_sum = kb.op(K::Reduce, {tail0}, T({}, DType::f32), sum);
  HostBuf sums(8);
  auto *ps = kb.param("sums", P(DType::f32));
  kb.store(kb.op(K::PtrAdd, {ps, kb.const_i(0, s32())}, P(DType::f32)), tail_sum);
  kb.store(kb.op(K::PtrAdd, {ps, kb.const_i(1, s32())}, P(DType::f32)), tail0_sum);
  interp::run(kb.fn, Grid{}, {bx.arg(), out.arg(), int_arg(n), out_default.arg(), sums.arg()});
  CHECK(out.as<float>() == x);
  CHECK(out_default.as<float>() == x);
  CHECK(sums.as<float>() == std::vector<float>{-1.5f * (B - n), 0.0f});
}

TEST_CASE("atomic_add returns the old values and applies duplicates in lane order", "[interp][memory]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t B = 32;
  auto vals = rng.floats(B), init = rng.floats(4);
  auto bv = buf_of(vals, DType::f32), acc = buf_of(init, DType::f32);
  HostBuf old(B * 4);
  KernelBuilder kb;
  auto *pv = kb.param("v", P(DType::f32)), *pa = kb.param("acc", P(DType::f32)), *po = kb.param("old", P(DType::f32));
  auto *lane = kb.arange(0, B);
  auto *slot = kb.op(K::Rem, {lane, kb.const_i(4, T({B}, DType::i32))}, T({B}, DType::i32));
  auto *mask = kb.cmp(ir::CmpPred::ne, lane, kb.const_i(5, T({B}, DType::i32)));  // lane 5 is off
  auto *r = kb.b.create(K::AtomicAdd, {kb.ptrs(pa, slot), kb.load(kb.tile_ptrs(pv, {B})), mask}, {T({B}, DType::f32)}, {},
                        kb.loc());
  kb.store(kb.tile_ptrs(po, {B}), r->result());
  interp::run(kb.fn, Grid{}, {bv.arg(), acc.arg(), old.arg()});
  std::vector<float> ref = init, ref_old(B, 0.0f);
  for (int64_t i = 0; i < B; ++i) {
    if (i == 5) continue;
    ref_old[size_t(i)] = ref[size_t(i % 4)];
    ref[size_t(i % 4)] += vals[size_t(i)];
  }
  CHECK(old.as<float>() == ref_old);
  CHECK(acc.as<float>() == ref);
}

TEST_CASE("memory layout per dtype: 16-bit floats as bit patterns, i1 as bytes, ints sign-extended", "[interp][memory]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t B = 128;
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::f64, DType::i1, DType::i8, DType::i16, DType::i32,
                  DType::i64}) {
    INFO("dtype " << dtype_name(d));
    HostBuf in(size_t(B * dtype_bytes(d))), out(in.bytes.size());
    for (auto &byte : in.bytes) byte = uint8_t(rng.integer(0, 255));
    if (d == DType::i1)
      for (auto &byte : in.bytes) byte &= 1;
    if (d == DType::bf16 || d == DType::f16)  // keep NaN patterns out: their payload is not preserved
      for (int64_t i = 0; i < B; ++i) in.bytes[size_t(2 * i + 1)] &= 0x3f;
    if (d == DType::f32)
      for (int64_t i = 0; i < B; ++i) in.bytes[size_t(4 * i + 3)] &= 0x3f;
    if (d == DType::f64)
      for (int64_t i = 0; i < B; ++i) in.bytes[size_t(8 * i + 7)] &= 0x3f;
    KernelBuilder kb;
    auto *pi = kb.param("in", P(d)), *po = kb.param("out", P(d));
    kb.store(kb.tile_ptrs(po, {B}), kb.load(kb.tile_ptrs(pi, {B})));
    interp::run(kb.fn, Grid{}, {in.arg(), out.arg()});
    REQUIRE(out.bytes == in.bytes);
  }
  // i8 loads sign-extend: -1 + 1 = 0 (not 256).
  std::vector<int8_t> m1(16, -1);
  auto bm = HostBuf::of(m1);
  HostBuf out(16 * 4);
  KernelBuilder kb;
  auto *pi = kb.param("in", P(DType::i8)), *po = kb.param("out", P(DType::i32));
  auto *x = kb.op(K::Cast, {kb.load(kb.tile_ptrs(pi, {16}))}, T({16}, DType::i32));
  kb.store(kb.tile_ptrs(po, {16}), kb.op(K::Add, {x, kb.const_i(1, T({16}, DType::i32))}, T({16}, DType::i32)));
  interp::run(kb.fn, Grid{}, {bm.arg(), out.arg()});
  for (int32_t v : out.as<int32_t>()) REQUIRE(v == 0);
}

TEST_CASE("argument count and kinds are checked", "[interp][memory]") {
  KernelBuilder kb;
  kb.param("p", P(DType::f32));
  kb.param("n", s32());
  HostBuf b(16);
  CHECK_THROWS_WITH(interp::run(kb.fn, Grid{}, {b.arg()}), Catch::Contains("takes 2 arguments but 1 were given"));
  CHECK_THROWS_WITH(interp::run(kb.fn, Grid{}, {b.arg(), float_arg(1.0)}),
                    Catch::Contains("argument 1 is a float but parameter 'n' has type i32"));
}
