// prefetch_loop_loads: a small load in a loop, addressed by the induction variable, is issued one iteration
// early and carried into its iteration; loads read by dots, loads that feed addresses, large tiles and loops
// that write memory are left alone; the results stay the same on the interpreter, including the copy for the
// iteration past the last and loops that run zero times (neither reads memory).
#include <catch2/catch.hpp>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "test_interp_helpers.h"
#include "tilejit/buffer.h"
#include "tilejit/kernel.h"

using namespace tilejit;
using ir::OpKind;

namespace {
bool inside_loop(const ir::Op *op) {
  for (const ir::Block *b = op->parent; b; b = b->parent ? b->parent->parent : nullptr)
    if (b->parent && b->parent->kind == OpKind::For) return true;
  return false;
}
std::vector<ir::Op *> loads(ir::Function &fn) { return dsl_testing::ops_of(fn, OpKind::Load); }
ir::Op *the_loop(ir::Function &fn) {
  auto loops = dsl_testing::ops_of(fn, OpKind::For);
  REQUIRE(loops.size() == 1);
  return loops[0];
}
}  // namespace

TEST_CASE("prefetch_loop_loads: the next iteration's load is issued in this one and carried",
          "[ir][passes][prefetch]") {
  using dsl_testing::P;
  using dsl_testing::S;
  auto fn = dsl_testing::trace(
      [] {
        Ptr<f32> x(dsl_testing::param(0)), out(dsl_testing::param(1));
        I32 n = dsl_testing::param(2);
        Tile r = arange(0, 16);
        Tile acc = zeros({16}, DType::f32);
        for_range(0, n, 16, [&](I32 k) { acc = acc + exp(load(x + k + r, k + r < n, 0.f)); });
        store(out + r, acc);
      },
      {P(DType::f32), P(DType::f32), S(DType::i32)});
  ir::optimize(*fn);
  auto ls = loads(*fn);
  REQUIRE(ls.size() == 2);
  ir::Op *first = inside_loop(ls[0]) ? ls[1] : ls[0], *next = first == ls[0] ? ls[1] : ls[0];
  CHECK(first->attrs.flag);
  CHECK(next->attrs.flag);
  CHECK_FALSE(inside_loop(first));
  CHECK(inside_loop(next));
  ir::Op *loop = the_loop(*fn);
  CHECK(loop->num_operands() == 3 + 2);  // acc and the prefetched tile are carried
  CHECK(loop->operand(4) == first->result());
  CHECK(loop->region(0)->ops.back()->operand(1) == next->result());
  // Both copies keep the original mask and add whether their iteration runs.
  for (ir::Op *l : {first, next}) {
    REQUIRE(l->num_operands() == 3);
    CHECK(l->operand(1)->def->kind == OpKind::And);
  }
  CHECK(ir::print(*fn).find("{prefetch}") != std::string::npos);
  // A second optimize leaves the prefetched loads alone.
  std::string once = ir::print(*fn);
  ir::optimize(*fn);
  CHECK(ir::print(*fn) == once);
}

TEST_CASE("prefetch_loop_loads: dot operands, addresses, large tiles and loops that store are left alone",
          "[ir][passes][prefetch]") {
  using dsl_testing::P;
  using dsl_testing::S;
  auto count_flagged = [](ir::Function &fn) {
    int k = 0;
    for (ir::Op *l : loads(fn)) k += l->attrs.flag;
    return k;
  };
  SECTION("a dot's operand") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<bf16> a(dsl_testing::param(0));
          Ptr<f32> out(dsl_testing::param(1));
          I32 n = dsl_testing::param(2);
          Tile r = arange(0, 16);
          Tile acc = zeros({16, 16}, DType::f32);
          for_range(0, n, 16, [&](I32 k) {
            Tile t = load(a + (k + r)(_, None) * 16 + r(None, _));
            acc = dot(t, t, acc);
          });
          store(out + r(_, None) * 16 + r(None, _), acc);
        },
        {P(DType::bf16), P(DType::f32), S(DType::i32)});
    ir::optimize(*fn);
    CHECK(count_flagged(*fn) == 0);
  }
  SECTION("an index that feeds an address") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<i32> idx(dsl_testing::param(0));
          Ptr<f32> x(dsl_testing::param(1)), out(dsl_testing::param(2));
          I32 n = dsl_testing::param(3);
          Tile r = arange(0, 16);
          Tile acc = zeros({16}, DType::f32);
          for_range(0, n, 1, [&](I32 k) { acc = acc + load(x + load(idx + k) * 16 + r); });
          store(out + r, acc);
        },
        {P(DType::i32), P(DType::f32), P(DType::f32), S(DType::i32)});
    ir::optimize(*fn);
    for (ir::Op *l : loads(*fn)) {
      INFO(ir::print(*fn));
      // The index load is left alone; the gathered tile may be prefetched only if its address does not
      // depend on a load (it does): nothing is flagged.
      CHECK_FALSE(l->attrs.flag);
    }
  }
  SECTION("a tile over 256 elements") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<f32> x(dsl_testing::param(0)), out(dsl_testing::param(1));
          I32 n = dsl_testing::param(2);
          Tile r = arange(0, 512);
          Tile acc = zeros({512}, DType::f32);
          for_range(0, n, 512, [&](I32 k) { acc = acc + load(x + k + r, k + r < n, 0.f); });
          store(out + r, acc);
        },
        {P(DType::f32), P(DType::f32), S(DType::i32)});
    ir::optimize(*fn);
    CHECK(count_flagged(*fn) == 0);
  }
  SECTION("a loop that stores") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<f32> x(dsl_testing::param(0));
          I32 n = dsl_testing::param(1);
          Tile r = arange(0, 16);
          for_range(0, n, 16, [&](I32 k) { store(x + k + 16 + r, load(x + k + r) * 2.f); });
        },
        {P(DType::f32), S(DType::i32)});
    ir::optimize(*fn);
    CHECK(count_flagged(*fn) == 0);
  }
}

TEST_CASE("prefetch_loop_loads on the interpreter: same sums; no read past the data or in an empty loop",
          "[ir][passes][prefetch][interp]") {
  interp_testing::Rng rng;
  INFO("seed " << rng.seed);
  const LaunchConfig interp{.backend = Backend::Interpreter};
  // Rows of x, 16 at a time: the copy for the iteration after the last would start past x's end.
  auto k = Kernel("row_sums", [](Ptr<f32> x, Ptr<f32> out, I32 n) {
    Tile r = arange(0, 16);
    Tile acc = zeros({16}, DType::f32);
    for_range(0, n, 1, [&](I32 row) { acc = acc + load(x + row * 16 + r) * 0.5f; });
    store(out + r, acc);
  });
  constexpr int rows = 7;
  auto xs = rng.floats(rows * 16);
  Buffer bx(rows * 16 * 4, Backend::Interpreter), out(16 * 4, Backend::Interpreter);
  bx.upload(xs);
  out.fill_bytes(0xff);
  REQUIRE_NOTHROW(k.launch(Grid{1}, interp, bx, out, rows));
  auto got = out.download_as<float>(16);
  for (int i = 0; i < 16; ++i) {
    float acc = 0;
    for (int row = 0; row < rows; ++row) {
      volatile float prod = xs[size_t(row * 16 + i)] * 0.5f;
      acc = acc + prod;
    }
    INFO("lane " << i);
    CHECK(got[size_t(i)] == acc);
  }
  out.fill_bytes(0xff);
  Buffer empty(4, Backend::Interpreter);  // too small for even one row: an empty loop must not read it
  REQUIRE_NOTHROW(k.launch(Grid{1}, interp, empty, out, 0));
  for (float v : out.download_as<float>(16)) CHECK(v == 0.f);
}
