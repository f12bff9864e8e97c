// GPU code generation of hand-built tile IR: the LLVM verifier passes, PTX is produced, and ptxas accepts
// it for sm_80 and sm_90a; the PTX shows the expected vector accesses and warp shuffles.
// (Correctness on a GPU is checked by the GPU tests; no GPU is needed here.)
#include <catch2/catch.hpp>

#include <limits>
#include <sstream>

#include "codegen/codegen.h"
#include "ir/passes.h"
#include "test_codegen_kernels.h"
#include "test_codegen_util.h"
#include "test_ir_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;
using namespace tilejit::codegen::testing;
using tilejit::codegen::CodegenOptions;
using tilejit::codegen::PtxResult;
using tilejit::codegen::compile_to_ptx;


TEST_CASE("codegen: vector add is vectorized and assembles", "[codegen]") {
  Function fn = vector_add(1024);
  std::string ll = codegen::emit_llvm_ir(fn, CodegenOptions{});
  REQUIRE(contains(ll, "define ptx_kernel void @vector_add"));
  auto r = compile_and_assemble(fn, "vector_add");
  INFO(r.ptx);
  REQUIRE(contains(r.ptx, "ld.global.v4.f32"));
  REQUIRE(contains(r.ptx, "st.global.v4.f32"));
  REQUIRE(r.shared_bytes == 0);
  REQUIRE(r.entry == "vector_add");
}

TEST_CASE("codegen: index_to_f32 of positions is a few conversions per thread and adds of immediates",
          "[codegen]") {
  auto r = compile_and_assemble(index_floats(64, 64), "index_floats");
  INFO(r.ptx);
  // Outputs 0-2: one conversion of the thread's part each (2: of its rows' part), then an add of an
  // immediate per distinct constant; output 3: one conversion per row; output 4 (row · column) converts
  // every element plainly. A plain lowering of all five converts 5·32 elements per thread.
  size_t cvt = count_lines(r.ptx, [](auto &l) { return contains(l, "cvt.rn.f32.s32") || contains(l, "cvt.rn.f32.u32"); });
  size_t imm = count_lines(r.ptx, [](auto &l) { return contains(l, "add.rn.f32") && contains(l, ", 0f"); });
  INFO("int → f32 conversions: " << cvt << ", f32 adds of an immediate: " << imm);
  REQUIRE(cvt >= 32);       // output 4, plainly
  REQUIRE(cvt <= 32 + 24);  // outputs 0-3: a few per thread
  REQUIRE(imm >= 16);       // the distinct constants (equal ones are one add)
}

TEST_CASE("codegen: fma_index folds its per-row part into the row max and the softmax's fma", "[codegen]") {
  // z = f32(x_row − column)·a + s, then fma(z, c, −max(z, 1)): one fma with an immediate per element for
  // z's split part, and per (thread, row) one add after the max and one fma for the offset. Without the
  // fold, every element pays an add (y + t) before the max: at least 32 adds per thread here.
  for (bool from_dot : {false, true}) {
    INFO((from_dot ? "tensor-core accumulator layout" : "blocked layout"));
    auto r = compile_and_assemble(index_fma(64, 64, from_dot, true), from_dot ? "index_fma_dot" : "index_fma");
    INFO(r.ptx);
    size_t add = count_lines(r.ptx, [](auto &l) { return contains(l, "add.rn.f32") || contains(l, "sub.rn.f32"); });
    size_t fma_imm = count_lines(r.ptx, [](auto &l) { return contains(l, "fma.rn.f32") && contains(l, ", 0f"); });
    INFO("f32 adds: " << add << ", fmas with an immediate: " << fma_imm);
    // 64×64 over 128 threads: 32 elements per thread. Split: an fma with an immediate per element whose
    // constant is not 0 or ±1 (those become nothing or an add/sub of a), and per row a thread holds one add
    // after the max. Unsplit: an add per element (32) on top.
    REQUIRE(fma_imm >= 16);
    REQUIRE(add < 32);
  }
  // Every output of the full kernel (the split stored whole, through where, across rows) assembles.
  for (bool from_dot : {false, true}) REQUIRE_NOTHROW(compile_and_assemble(index_fma(64, 64, from_dot), "index_fma"));
}

TEST_CASE("codegen: fma_index of an index that is 0 without folding keeps the factor", "[codegen]") {
  // The split once made every element the addend c alone, so a NaN or infinite factor a gave c where
  // fma(0, a, c) (the interpreter) is NaN. (Values: test_codegen_sim.cpp.)
  Function fn = fma_index_zero(16);
  std::string ll = codegen::emit_llvm_ir(fn, CodegenOptions{});
  INFO(ll);
  CHECK(contains(ll, "@llvm.fma.f32(float %a, float 0.000000e+00"));
  REQUIRE_NOTHROW(compile_and_assemble(fn, "fma_index_zero"));
}

TEST_CASE("codegen: an fma or where whose operand changes layout converts it once", "[codegen]") {
  // s = A·B lands in the tensor-core layout and x is loaded in a blocked one: x crosses to s's layout through
  // shared memory (barriers). The checks for fma_index's split look at operands without converting them, so
  // an fma or a where costs the same barriers as a mul of the same operands.
  auto build = [](OpKind kind) {
    const int64_t M = 64, N = 64, KD = 16;
    FnBuilder f("convert_once");
    Value *ap = f.param("a", P({}, F16), true), *bp = f.param("b", P({}, F16), true);
    Value *xp = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
    Value *ra = bcast(f, bin(f, OpKind::Mul, f.arange(0, M), f.ci(T({M}, I32), KD)), 1, {M, KD});
    Value *av = load(f, ptr_add(f, ap, bin(f, OpKind::Add, ra, bcast(f, f.arange(0, KD), 0, {M, KD}))));
    Value *rb = bcast(f, bin(f, OpKind::Mul, f.arange(0, KD), f.ci(T({KD}, I32), N)), 1, {KD, N});
    Value *bv = load(f, ptr_add(f, bp, bin(f, OpKind::Add, rb, bcast(f, f.arange(0, N), 0, {KD, N}))));
    Value *s = f.op(OpKind::Dot, {av, bv, f.cf(T({M, N}, F32), 0.0)}, T({M, N}, F32));
    Value *rc = bin(f, OpKind::Add, bin(f, OpKind::Mul, bcast(f, f.arange(0, M), 1, {M, N}), f.ci(T({M, N}, I32), N)),
                    bcast(f, f.arange(0, N), 0, {M, N}));
    Value *x = load(f, ptr_add(f, xp, rc));
    Value *r = kind == OpKind::Fma ? f.op(kind, {x, s, s}, T({M, N}, F32))
               : kind == OpKind::Select
                   ? f.op(kind, {f.cmp(CmpPred::lt, s, f.cf(T({M, N}, F32), 0.0)), x, f.cf(T({M, N}, F32), -INFINITY)},
                          T({M, N}, F32))
                   : bin(f, kind, x, s);
    store(f, ptr_add(f, out, rc), r);
    verify(f.fn);
    return std::move(f.fn);
  };
  auto barriers = [&](OpKind kind) {
    auto r = compile_and_assemble(build(kind), "convert_once");
    return count_lines(r.ptx, [](auto &l) { return contains(l, "bar.sync") || contains(l, "barrier.sync"); });
  };
  size_t mul = barriers(OpKind::Mul);
  INFO("barriers with a mul: " << mul);
  REQUIRE(mul > 0);  // the test's premise: x does change layout
  CHECK(barriers(OpKind::Fma) == mul);
  CHECK(barriers(OpKind::Select) == mul);
}

TEST_CASE("codegen: index_to_f32 with a constant part of 2^24 or more converts plainly", "[codegen]") {
  // arange + 2^31 − 64 is past f32's exact integers (and its i32 sum wraps past 2^31): element by element,
  // whether the constant is a tile or a splat scalar.
  const int64_t n = 128;
  for (bool scalar : {false, true}) {
    INFO((scalar ? "splat scalar constant" : "tile constant"));
    FnBuilder f("index_big");
    Value *out = f.param("out", P({}, F32), true);
    Value *offs = f.arange(0, n);
    const int64_t big = (int64_t(1) << 31) - 64;
    Value *k = scalar ? splat(f, f.ci(S(I32), big), {n}) : f.ci(T({n}, I32), big);
    store(f, ptr_add(f, out, offs), index_cast(f, bin(f, OpKind::Add, offs, k)));
    verify(f.fn);
    auto r = compile_and_assemble(f.fn, "index_big");
    INFO(r.ptx);
    REQUIRE(contains(r.ptx, "cvt.rn.f32.s32"));
    REQUIRE_FALSE(contains(r.ptx, "add.rn.f32"));
  }
}

TEST_CASE("codegen: index_to_f32 of an operand reusing its subexpressions stays linear", "[codegen]") {
  // a − (a − offs), twenty times over: 2^20 paths through the operand, 41 distinct values. Each value is
  // decomposed once; the LLVM IR stays the size of the plain cast's, give or take.
  auto build = [](bool index) {
    FnBuilder f("index_dag");
    Value *out = f.param("out", P({}, F32), true), *shift = f.param("S", S(I32));
    Value *offs = f.arange(0, 128);
    Value *a = bin(f, OpKind::Add, offs, splat(f, shift, {128}));
    for (int i = 0; i < 20; ++i) a = bin(f, OpKind::Sub, a, bin(f, OpKind::Sub, a, offs));
    store(f, ptr_add(f, out, offs), index ? index_cast(f, a) : cast(f, a, F32));
    verify(f.fn);
    return std::move(f.fn);
  };
  size_t plain = codegen::emit_llvm_ir(build(false), CodegenOptions{}).size();
  size_t index = codegen::emit_llvm_ir(build(true), CodegenOptions{}).size();
  INFO("LLVM IR bytes: plain " << plain << ", index " << index);
  REQUIRE(index < 2 * plain);
}

TEST_CASE("codegen: without alignment facts the vector add falls back to scalar accesses", "[codegen]") {
  Function fn = vector_add(1024);
  fn.params[0].align16 = false;  // x may be misaligned
  fn.params[3].div16 = false;    // n not divisible by 16: the mask is not uniform over 4 elements
  auto r = compile_and_assemble(fn, "vector_add_unaligned");
  INFO(r.ptx);
  REQUIRE_FALSE(contains(r.ptx, "ld.global.v4"));
}

TEST_CASE("codegen: row softmax uses warp shuffles and assembles", "[codegen]") {
  for (DType dt : {F32, BF16}) {
    auto r = compile_and_assemble(softmax(4, 128, dt), fmt::format("softmax_{}", dtype_name(dt)));
    INFO(r.ptx);
    REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
    REQUIRE(contains(r.ptx, "ex2.approx"));
  }
  // One long row per program: the reduction crosses warps through shared memory.
  auto r = compile_and_assemble(softmax(1, 2048, F32), "softmax_long_row", 8);
  REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
  REQUIRE(contains(r.ptx, "bar.sync"));
  REQUIRE(r.shared_bytes > 0);
}

TEST_CASE("codegen: argmax/argmin and sums across warps assemble", "[codegen]") {
  auto r = compile_and_assemble(arg_reductions(512, 32, 64), "arg_reductions");
  REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
  REQUIRE(r.shared_bytes > 0);
}

TEST_CASE("codegen: 64x64x32 dot in a K loop with a carried accumulator", "[codegen]") {
  for (DType dt : {BF16, DType::f16, F32}) {
    auto r = compile_and_assemble(matmul(64, 64, 32, dt), fmt::format("matmul_{}", dtype_name(dt)));
    INFO(r.ptx);
    // f32 keeps the exact FMA path; f16/bf16 run on tensor cores (tests/test_codegen_mma.cpp).
    if (dt == F32) REQUIRE(contains(r.ptx, "fma.rn.f32"));
    else REQUIRE((contains(r.ptx, "mma.sync.aligned.m16n8k16") || contains(r.ptx, "wgmma.mma_async.sync.aligned")));
    // Each thread loads 4 consecutive elements of a row: one 16-byte (f32) or 8-byte (16-bit types) access.
    REQUIRE(contains(r.ptx, dt == F32 ? "ld.global.v4.f32" : "ld.global.v2.b32"));
    REQUIRE(r.shared_bytes >= (64 * 32 + 32 * 64) * dtype_bytes(dt));
    REQUIRE(r.shared_bytes <= 48 * 1024);
  }
}

TEST_CASE("codegen: if with tile and scalar results", "[codegen]") {
  compile_and_assemble(branchy(), "branchy");
}

TEST_CASE("codegen: casts among BF16/f16/F32/f64/I1/i8/I32/i64", "[codegen]") {
  compile_and_assemble(casts(), "casts");
}

TEST_CASE("codegen: atomic_add on tiles and scalars", "[codegen]") {
  auto r = compile_and_assemble(atomics(), "atomics");
  INFO(r.ptx);
  REQUIRE(contains(r.ptx, "atom.global.add.f32"));
  REQUIRE(contains(r.ptx, "atom.global.add.u32"));
}

TEST_CASE("codegen: math, transposes and reshapes", "[codegen]") {
  auto r = compile_and_assemble(math_and_shapes(), "math_and_shapes", 2);
  REQUIRE(contains(r.ptx, "tanh.approx.f32"));
  REQUIRE(contains(r.ptx, "lg2.approx"));
}

TEST_CASE("codegen: num_warps 1, 2 and 8 all assemble", "[codegen]") {
  for (int w : {1, 2, 8}) {
    compile_and_assemble(softmax(2, 256, F32), fmt::format("softmax_w{}", w), w);
    compile_and_assemble(matmul(32, 64, 16, BF16), fmt::format("matmul_w{}", w), w);
  }
}

TEST_CASE("codegen: errors name the problem", "[codegen]") {
  Function fn = vector_add(256);
  CodegenOptions bad;
  bad.arch = "sm_100";
  REQUIRE_THROWS_WITH(codegen::compile_to_ptx(fn, bad), Catch::Contains("unknown GPU arch 'sm_100'"));
  CodegenOptions warps;
  warps.num_warps = 3;
  REQUIRE_THROWS_AS(codegen::compile_to_ptx(fn, warps), CompileError);
  REQUIRE(codegen::llvm_version().rfind("19.", 0) == 0);
}

TEST_CASE("codegen: sm_90a dots use wgmma unless CodegenOptions::wgmma is off, sm_80 never", "[codegen][mma]") {
  ir::Function fn = matmul(64, 64, 32, BF16);
  CodegenOptions opts;
  opts.arch = "sm_90a";
  PtxResult wg = compile_to_ptx(fn, opts);
  REQUIRE(contains(wg.ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));
  REQUIRE_FALSE(contains(wg.ptx, "mma.sync.aligned.m16n8k16"));
  opts.wgmma = false;
  PtxResult mma = compile_to_ptx(fn, opts);
  REQUIRE(contains(mma.ptx, "mma.sync.aligned.m16n8k16"));
  REQUIRE_FALSE(contains(mma.ptx, "wgmma"));
  // The wgmma kernel's dynamic shared buffer is rounded up to 1024 bytes at run time: 1 KB of slack.
  REQUIRE(wg.shared_bytes >= mma.shared_bytes + 1024);
  opts.arch = "sm_80";
  opts.wgmma = true;
  REQUIRE_FALSE(contains(compile_to_ptx(fn, opts).ptx, "wgmma"));
}
