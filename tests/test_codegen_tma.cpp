// TMA copies in software pipelines (codegen/tma.h, codegen/pipeline_tma.cpp, runtime/tensor_maps.cpp): which loads
// a tensor map can copy, the maps planned for matmul, the PTX and its assembly, the plan text's 'tma' mark, and
// the launch metadata the cache keeps. The copies themselves run in tests/gpu (label gpu).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <regex>

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/specialize_warps.h"
#include "codegen/tma.h"
#include "ir/parser.h"
#include "runtime/kernel_artifact.h"
#include "test_codegen_util.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/kernels.h"
#include "tilejit/stages.h"

using namespace tilejit;
using codegen::testing::contains;
using codegen::testing::count_lines;
using codegen::testing::ptxas_v;

namespace {

kernels::BuiltinSpec matmul_spec(int bm, int bn, int bk, int warps, int stages, bool tma = true) {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  spec.block_m = bm, spec.block_n = bn, spec.block_k = bk;
  spec.num_warps = warps, spec.num_stages = stages;
  spec.tma = tma;
  return spec;
}

codegen::CodegenOptions options_of(const kernels::BuiltinSpec &spec) {
  codegen::CodegenOptions o;
  o.arch = spec.arch;
  o.num_warps = spec.num_warps;
  o.num_stages = spec.num_stages;
  o.tma = spec.tma;
  return o;
}

// The loads of fn's first loop body, in order.
std::vector<const ir::Op *> loop_loads(const ir::Function &fn, const ir::Op **loop) {
  std::vector<const ir::Op *> loads;
  *loop = nullptr;
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::For && !*loop) *loop = &op;
    if (op.kind == ir::OpKind::Load && *loop && op.parent == (*loop)->region(0)) loads.push_back(&op);
  });
  return loads;
}

std::string matmul_text(int bm = 128, int bn = 256, int bk = 64) {
  return kernels::builtin_ir("matmul", matmul_spec(bm, bn, bk, 8, 3));
}

// Why tma_tile refuses the a-operand load of the matmul text after `edit`.
std::string refusal(const std::string &from, const std::string &to, int which = 0) {
  std::string text = matmul_text();
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  auto fn = ir::parse(text);
  const ir::Op *loop = nullptr;
  auto loads = loop_loads(*fn, &loop);
  REQUIRE(loads.size() == 2);
  std::string why;
  REQUIRE_FALSE(codegen::tma_tile(*fn, *loads[size_t(which)], *loop, &why).has_value());
  return why;
}

}  // namespace

TEST_CASE("tma: matmul's operand loads are tiles of 2-D tensors, masked by their extents", "[codegen][tma]") {
  auto fn = ir::parse(matmul_text());
  const ir::Op *loop = nullptr;
  auto loads = loop_loads(*fn, &loop);
  REQUIRE(loads.size() == 2);
  // a: M rows (p3) of K columns (p5), lda (p6) apart; its tile starts at row program_id(0)·128, column k0.
  auto a = codegen::tma_tile(*fn, *loads[0], *loop);
  REQUIRE(a);
  CHECK(a->map.base_param == 0);
  REQUIRE(a->map.dims.size() == 2);
  CHECK(a->map.dims[0] == codegen::TensorMapDim{codegen::LaunchValue{1, {5}}, codegen::LaunchValue{}});
  CHECK(a->map.dims[1] == codegen::TensorMapDim{codegen::LaunchValue{1, {3}}, codegen::LaunchValue{1, {6}}});
  REQUIRE(a->start.size() == 2);
  REQUIRE(a->start[1].terms.size() == 1);
  CHECK(a->start[1].terms[0].first->def->kind == ir::OpKind::ProgramId);
  CHECK(a->start[1].terms[0].second == 128);
  REQUIRE(a->start[0].terms.size() == 1);
  CHECK(a->start[0].terms[0].first == loop->region(0)->arg(0));
  CHECK(a->start[0].terms[0].second == 1);
  // b: K rows (p5) of N columns (p4), ldb (p7) apart; rows from k0, columns from program_id(1)·256.
  auto b = codegen::tma_tile(*fn, *loads[1], *loop);
  REQUIRE(b);
  CHECK(b->map.base_param == 1);
  CHECK(codegen::tensor_map_text(b->map) == "base=p1 bf16 box=0x0 swizzle=128 dims=p4:1,p5:p7");
  CHECK(b->start[1].terms[0].first == loop->region(0)->arg(0));
  CHECK(b->start[0].terms[0].second == 256);
}

TEST_CASE("tma: a load TMA would read differently is refused, with the reason", "[codegen][tma]") {
  // The mask must be exactly row < M: TMA zero-fills from the extent on, `row <= M` reads row M.
  std::string text = matmul_text();
  REQUIRE(contains(text, "{pred = lt}"));
  CHECK(contains(refusal("{pred = lt}", "{pred = le}"), "mask"));
  // An unaligned base pointer (no align16 specialization) or row stride (lda not divisible by 16).
  CHECK(contains(refusal("%a: ptr<bf16> {align16}", "%a: ptr<bf16>"), "16-byte aligned"));
  CHECK(contains(refusal("%lda: i32 {div16}", "%lda: i32"), "row stride"));
  // A loop starting below 0: the first tile's coordinate may be negative, where TMA reads zeros and the load reads
  // memory before the row.
  CHECK(contains(refusal("constant {value = 0} : i32\n", "constant {value = -64} : i32\n"), "negative"));
  // The kernel stores through a's parameter (its output written over a): TMA's reads (the async proxy) would not be
  // ordered after those stores; b, which nothing writes, still qualifies.
  CHECK(contains(refusal("= splat %c :", "= splat %a :"), "writes through its tensor's pointer"));
  std::string over_a = matmul_text();
  over_a.replace(over_a.find("= splat %c :"), 12, "= splat %a :");
  auto fn = ir::parse(over_a);
  const ir::Op *loop = nullptr;
  auto loads = loop_loads(*fn, &loop);
  CHECK(codegen::tma_tile(*fn, *loads[1], *loop).has_value());
}

TEST_CASE("tma: a tile starting a constant before the loop's counter qualifies once the loop starts past it",
          "[codegen][tma]") {
  // a's columns from k0 − 64: from a loop starting at 0 the first tile would start at −64 (refused); from a loop
  // starting at 64 every start is ≥ 0 (FlashAttention-3's order reads the previous key block's V this way).
  std::string text = matmul_text();
  const std::string splat = "%19 = splat %17 : tensor<64xi32>";
  REQUIRE(contains(text, splat));
  text.replace(text.find(splat), splat.size(), "%900 = sub %17, %15 : i32\n    %19 = splat %900 : tensor<64xi32>");
  auto tile_of_a = [](const std::string &t, std::string *why) {
    auto fn = ir::parse(t);
    const ir::Op *loop = nullptr;
    auto loads = loop_loads(*fn, &loop);
    REQUIRE(loads.size() == 2);
    return codegen::tma_tile(*fn, *loads[0], *loop, why);
  };
  std::string why;
  CHECK_FALSE(tile_of_a(text, &why).has_value());
  CHECK(contains(why, "negative"));
  const std::string loop_from_0 = "= for %17 = %14 to";
  REQUIRE(contains(text, loop_from_0));
  text.replace(text.find(loop_from_0), loop_from_0.size(), "= for %17 = %15 to");
  auto a = tile_of_a(text, &why);
  REQUIRE(a);
  CHECK(a->start[0].constant == -64);
}

TEST_CASE("tma: a load without a mask has unbounded extents", "[codegen][tma]") {
  // Written directly: the matmul's b load with its mask and `other` dropped.
  std::string text = matmul_text();
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex(R"((%\d+) = load (%\d+), (%\d+), (%\d+) : tensor<64x256xbf16>)")));
  text.replace(size_t(m.position(0)), size_t(m.length(0)), fmt::format("{} = load {} : tensor<64x256xbf16>", m[1].str(), m[2].str()));
  auto fn = ir::parse(text);
  const ir::Op *loop = nullptr;
  auto loads = loop_loads(*fn, &loop);
  auto b = codegen::tma_tile(*fn, *loads[1], *loop);
  REQUIRE(b);
  CHECK(codegen::tensor_map_text(b->map) == "base=p1 bf16 box=0x0 swizzle=128 dims=*:1,*:p7");
}

TEST_CASE("tma: attention's K and V tiles are 4-D maps, batch and head offsets their own dims", "[codegen][tma]") {
  // attention_fwd: K + b·stride_kb + h·stride_kh + (n0 + i)·stride_ks + j, masked by key < seqlen_k only.
  kernels::BuiltinSpec spec;
  spec.head_dim = 128, spec.block_m = 128, spec.block_n = 64, spec.num_warps = 8, spec.num_stages = 2;
  auto fn = ir::parse(kernels::builtin_ir("attention", spec));
  const ir::Op *loop = nullptr;
  auto loads = loop_loads(*fn, &loop);
  REQUIRE(loads.size() == 2);
  auto k = codegen::tma_tile(*fn, *loads[0], *loop);
  REQUIRE(k);
  const int kb = 12, kh = 13, ks = 14, seqlen_k = 8;  // parameter indices of attention_fwd
  REQUIRE(fn->params[size_t(kb)].name == "stride_kb");
  REQUIRE(fn->params[size_t(kh)].name == "stride_kh");
  REQUIRE(fn->params[size_t(ks)].name == "stride_ks");
  REQUIRE(fn->params[size_t(seqlen_k)].name == "seqlen_k");
  // Columns unbounded (no mask), keys up to seqlen_k stride_ks apart, then the batch and head dims; the head and
  // batch indices divide program_id(1) by `heads`, which the launch checks is ≥ 0.
  const int heads = 6;
  REQUIRE(fn->params[size_t(heads)].name == "heads");
  CHECK(codegen::tensor_map_text(k->map) == fmt::format("base=p1 bf16 box=0x0 swizzle=128 dims=*:1,p{}:p{},*:p{},*:p{} "
                                                        "assumes=p{}", seqlen_k, ks, kb, kh, heads));
  REQUIRE(k->start.size() == 4);
  // b = program_id(1) / heads, h = program_id(1) % heads: quotient and remainder of a program id, never negative.
  REQUIRE(k->start[2].terms.size() == 1);
  CHECK(k->start[2].terms[0].first->def->kind == ir::OpKind::Div);
  REQUIRE(k->start[3].terms.size() == 1);
  CHECK(k->start[3].terms[0].first->def->kind == ir::OpKind::Rem);
}

TEST_CASE("tma: tensor maps and launch values read back from their text", "[codegen][tma]") {
  codegen::TensorMapSpec s;
  s.base_param = 1;
  s.dtype = DType::f16;
  s.dims = {{codegen::LaunchValue{1, {5}}, {}}, {codegen::LaunchValue{2, {3, 4}}, {64, {}}}, {std::nullopt, {1, {9}}}};
  s.box_rows = 8, s.box_cols = 32, s.swizzle_bytes = 64;
  s.assumed = {7, 2};
  const std::string text = codegen::tensor_map_text(s);
  CHECK(text == "base=p1 f16 box=8x32 swizzle=64 dims=p5:1,2*p3*p4:64,*:p9 assumes=p7,p2");
  auto back = codegen::parse_tensor_map(text);
  REQUIRE(back);
  CHECK(*back == s);
  for (const char *bad : {"", "base=p1 f16", "base=q1 f16 box=8x32 swizzle=64 dims=p5:1,p3:64",
                          "base=p1 f16 box=8 swizzle=64 dims=p5:1,p3:64", "base=p1 f16 box=8x32 swizzle=64 dims=p5:1",
                          "base=p1 f16 box=8x32 swizzle=64 dims=p5:1,p3*2:64", "base=p1 f32 box=8x32 swizzle=64 dims=p5:1,p3:64",
                          "base=p1 f16 box=8x32 swizzle=48 dims=p5:1,p3:64", "base=p1 f16 box=8x32 swizzle=64 dims=p5,p3:64",
                          "base=p1 f16 box=8x32 swizzle=64 dims=1:1,1:1,1:1,1:1,1:1,1:1",
                          "base=p1 f16 box=8x32 swizzle=64 dims=p5:1,p3:64 assumes=",
                          "base=p1 f16 box=8x32 swizzle=64 dims=p5:1,p3:64 assumes=q2"}) {
    INFO(bad);
    CHECK_FALSE(codegen::parse_tensor_map(bad));
  }
  std::vector<KernelArg> args(6);
  args[3].i = 7, args[4].i = 3, args[5].i = 1 << 20;
  CHECK(s.dims[1].extent->at(args) == 42);
  CHECK(codegen::LaunchValue{1 << 30, {5, 5}}.at(args) == std::nullopt);  // overflows int64
  args[3].kind = KernelArg::Kind::Ptr;
  CHECK(s.dims[1].extent->at(args) == std::nullopt);  // not an integer argument
}

TEST_CASE("tma: matmul's pipelines copy both operands by TMA, assemble for sm_90a, and read the maps in place",
          "[codegen][tma][pipeline]") {
  for (auto [bm, bn, bk, warps] : {std::array{128, 256, 64, 8}, std::array{128, 128, 64, 8},
                                   std::array{64, 128, 32, 4}, std::array{128, 64, 16, 4}})
    for (int stages : {2, 3, 4, 5}) {
      if ((bm + bn) * bk * 2 * stages > 160 * 1024) continue;  // fewer stages fit: another case
      auto spec = matmul_spec(bm, bn, bk, warps, stages);
      INFO(bm << "x" << bn << "x" << bk << ", " << warps << " warps, " << stages << " stages");
      auto fn = ir::parse(kernels::builtin_ir("matmul", spec));
      codegen::PtxResult r = codegen::compile_to_ptx(*fn, options_of(spec));
      // Two maps, a's and b's, after the kernel's nine parameters, 64-byte aligned and read through cvta.param.
      REQUIRE(r.tensor_maps.size() == 2);
      CHECK(contains(r.tensor_maps[0], "dims=p5:1,p3:p6"));
      CHECK(contains(r.tensor_maps[1], "dims=p4:1,p5:p7"));
      CHECK(contains(r.ptx, ".param .align 64 .b8 matmul_param_9[128]"));
      CHECK(contains(r.ptx, ".param .align 64 .b8 matmul_param_10[128]"));
      CHECK(count_lines(r.ptx, [](auto &l) { return contains(l, "cvta.param.u64"); }) == 2);
      CHECK_FALSE(contains(r.ptx, "ld.local"));  // no copy of a map to local memory
      // Per stage issued: a in boxes of 8 rows (wgmma's row order), b per 64-column panel; no cp.async at all.
      const int64_t a_boxes = (bm / 8) * std::max(1, bk / 64), b_boxes = bn / std::min(bn, 64);
      const int per_stage = int(a_boxes + b_boxes);
      const int issued = count_lines(r.ptx, [](auto &l) { return contains(l, "cp.async.bulk.tensor.2d"); });
      CHECK(issued % per_stage == 0);
      CHECK(issued >= 2 * per_stage);
      CHECK_FALSE(contains(r.ptx, "cp.async.cg"));
      CHECK_FALSE(contains(r.ptx, "cp.async.wait_group"));
      CHECK(count_lines(r.ptx, [](auto &l) { return contains(l, "mbarrier.init.shared"); }) >= 1);
      CHECK(contains(r.ptx, "fence.mbarrier_init.release.cluster"));
      CHECK(contains(r.ptx, "mbarrier.try_wait.parity.shared::cta.b64"));
      CHECK(contains(r.ptx, fmt::format("mbarrier.arrive.expect_tx.shared::cta.b64")));
      CHECK(contains(r.ptx, "mbarrier.inval.shared"));
      auto [rc, log] = ptxas_v(r.ptx, "sm_90a", fmt::format("matmul_tma_{}x{}x{}_w{}_s{}", bm, bn, bk, warps, stages));
      INFO(log);
      REQUIRE(rc == 0);
      CHECK_FALSE(contains(log, "serialized"));
      CHECK(contains(log, "0 bytes spill stores"));
    }
}

TEST_CASE("tma: the expected bytes of a stage are its tiles' bytes", "[codegen][tma][pipeline]") {
  // 128x64 + 64x256 bf16 tiles: 16384 + 32768 bytes per stage, the count each stage's arrive.expect_tx names.
  auto spec = matmul_spec(128, 256, 64, 8, 3);
  auto fn = ir::parse(kernels::builtin_ir("matmul", spec));
  std::string lowered = codegen::print_lowering(*fn, options_of(spec));
  CHECK(contains(lowered, "copied ahead by TMA into the stage buffer its dots read (tensor map 0: base=p0 bf16 "
                          "box=8x64 swizzle=128 dims=p5:1,p3:p6)"));
  CHECK(contains(lowered, "(tensor map 1: base=p1 bf16 box=64x64 swizzle=128 dims=p4:1,p5:p7)"));
  std::string llvm;
  codegen::print_lowering(*fn, options_of(spec), &llvm);
  CHECK(contains(llvm, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"));
  CHECK(std::regex_search(llvm, std::regex(R"(expect_tx[^\n]*\(i32 %\w+, i32 49152\))")));
}

TEST_CASE("tma: without the option, or below sm_90a, or on mma.sync, loads are copied by cp.async",
          "[codegen][tma][pipeline]") {
  auto spec = matmul_spec(128, 128, 64, 8, 3);
  auto fn = ir::parse(kernels::builtin_ir("matmul", spec));
  auto opts = options_of(spec);
  for (int variant = 0; variant < 3; ++variant) {
    auto o = opts;
    if (variant == 0) o.tma = false;
    if (variant == 1) o.arch = "sm_80";
    if (variant == 2) o.wgmma = false;
    INFO("variant " << variant);
    codegen::PtxResult r = codegen::compile_to_ptx(*fn, o);
    CHECK(r.tensor_maps.empty());
    CHECK_FALSE(contains(r.ptx, "cp.async.bulk"));
    CHECK_FALSE(contains(r.ptx, "mbarrier"));
    CHECK(contains(r.ptx, "cp.async.cg"));
  }
}

TEST_CASE("tma: the plan text marks TMA copies, reads them back, and refuses a mark it cannot follow",
          "[codegen][tma][layout-text]") {
  auto spec = matmul_spec(128, 256, 64, 8, 3);
  LaunchConfig cfg;
  cfg.arch = "sm_90a";
  cfg.num_warps = 8;
  cfg.num_stages = 3;
  cfg.tma = true;
  const std::string ir = kernels::builtin_ir("matmul", spec);
  const std::string plan = stage_of_text(ir, "specialize_warps", cfg);
  REQUIRE(contains(plan, "// the lowering plan for sm_90a, 8 warps, 3 stages, TMA copies"));
  REQUIRE(count_lines(plan, [](auto &l) { return contains(l, "pipelined tma>"); }) == 2);
  // Read back as written: the same PTX as compiling the kernel.
  CHECK(stage_of_text(plan, "ptx", cfg) == kernels::builtin_ptx("matmul", spec));
  // b's mark taken off: b is copied by cp.async, a by TMA (one map).
  std::string a_only = plan;
  const size_t b_mark = a_only.rfind(" pipelined tma>");
  a_only.replace(b_mark, 15, " pipelined>");
  const std::string ptx = stage_of_text(a_only, "ptx", cfg);
  CHECK(contains(ptx, "cp.async.bulk.tensor.2d"));
  CHECK(contains(ptx, "cp.async.cg"));
  CHECK(contains(ptx, "matmul_param_9[128]"));
  CHECK_FALSE(contains(ptx, "matmul_param_10"));
  // 'tma' without 'pipelined', and on a load that TMA cannot copy (the loop from −64: a tile may start before
  // its tensor, still pipelined by cp.async).
  std::string bare = plan;
  bare.replace(bare.find(" pipelined tma>"), 15, " tma>");
  CHECK_THROWS_WITH(stage_of_text(bare, "ptx", cfg), Catch::Contains("'tma' only with 'pipelined'"));
  std::string before = plan;
  const std::string lb = "constant {value = 0} : i32";
  REQUIRE(contains(before, lb));
  before.replace(before.find(lb), lb.size(), "constant {value = -64} : i32");
  CHECK_THROWS_WITH(stage_of_text(before, "ptx", cfg), Catch::Contains("no 'tma' on this load: a start of its tile may be negative"));
}

TEST_CASE("tma: kernel artifacts keep their tensor maps", "[cache][tma]") {
  runtime::KernelArtifact a{"matmul", 1024, 256, "PTX TEXT\nsecond line", 0, 0,
                            {"base=p0 bf16 box=8x64 swizzle=128 dims=p5:1,p3:p6",
                             "base=p1 bf16 box=64x64 swizzle=128 dims=p4:1,p5:p7"}};
  auto back = runtime::decode_artifact(runtime::encode_artifact(a));
  REQUIRE(back);
  CHECK(back->tensor_maps == a.tensor_maps);
  CHECK(back->code == a.code);
  CHECK(back->spill_stores == 0);
  a.spill_stores = a.spill_loads = -1;
  back = runtime::decode_artifact(runtime::encode_artifact(a));
  REQUIRE(back);
  CHECK(back->tensor_maps == a.tensor_maps);
  // A count the lines do not match is not an artifact (the cache then rebuilds it).
  std::string text = runtime::encode_artifact(a);
  CHECK_FALSE(runtime::decode_artifact(std::regex_replace(text, std::regex("tensor_maps=2"), "tensor_maps=9")));
  CHECK_FALSE(runtime::decode_artifact(std::regex_replace(text, std::regex("tensor_maps=2"), "tensor_maps=0")));
  CHECK_FALSE(runtime::decode_artifact(std::regex_replace(text, std::regex("tensor_maps=2"), "tensor_maps=3")));
  CHECK_FALSE(runtime::decode_artifact(std::regex_replace(text, std::regex("p3:p6\n"), "p3:p6x\n")));
}

TEST_CASE("warp specialization: a producer warpgroup feeds matmul's K loop, the consumers sync among themselves",
          "[codegen][tma][warp-specialize]") {
  for (auto [bm, bn, bk, warps, stages] : {std::array{128, 256, 64, 8, 3}, std::array{128, 128, 64, 8, 4},
                                           std::array{64, 128, 32, 4, 5}, std::array{128, 128, 64, 8, 2}}) {
    auto spec = matmul_spec(bm, bn, bk, warps, stages);
    spec.warp_specialize = true;
    INFO(bm << "x" << bn << "x" << bk << ", " << warps << " warps, " << stages << " stages");
    auto fn = ir::parse(kernels::builtin_ir("matmul", spec));
    auto opts = options_of(spec);
    opts.warp_specialize = true;
    codegen::PtxResult r = codegen::compile_to_ptx(*fn, opts);
    const int threads = 32 * (warps + 4);
    CHECK(r.num_threads == threads);
    CHECK(contains(r.ptx, fmt::format(".maxntid {}, 1, 1", threads)));
    CHECK(contains(r.ptx, ".minnctapersm 1"));
    CHECK(contains(r.ptx, "setmaxnreg.dec.sync.aligned.u32 40;"));
    const codegen::RegisterSplit regs = codegen::register_split(warps, 0);
    if (regs.consumer) CHECK(contains(r.ptx, fmt::format("setmaxnreg.inc.sync.aligned.u32 {};", regs.consumer)));
    else CHECK_FALSE(contains(r.ptx, "setmaxnreg.inc"));
    // One barrier of every thread (after the mbarriers' initialization); the consumers' barriers count their threads.
    CHECK(count_lines(r.ptx, [](auto &l) { return contains(l, "bar.sync \t0;") || contains(l, "bar.sync 0;"); }) == 1);
    CHECK(contains(r.ptx, fmt::format("barrier.sync \t0, {};", 32 * warps)));
    // The producer waits on empty, the consumers on full; no cp.async, no per-iteration barrier of all threads.
    CHECK(count_lines(r.ptx, [](auto &l) { return contains(l, "mbarrier.try_wait.parity"); }) == 2);
    CHECK(contains(r.ptx, "mbarrier.arrive.shared"));
    CHECK_FALSE(contains(r.ptx, "cp.async.cg"));
    CHECK_FALSE(contains(r.ptx, "mbarrier.inval"));
    auto [rc, log] = ptxas_v(r.ptx, "sm_90a", fmt::format("matmul_ws_{}x{}x{}_w{}_s{}", bm, bn, bk, warps, stages));
    INFO(log);
    REQUIRE(rc == 0);
    CHECK_FALSE(contains(log, "warning"));  // C7508: setmaxnreg ignored; C7512: wgmma serialized
    CHECK(contains(log, "0 bytes spill stores"));
  }
}

TEST_CASE("warp specialization: the registers a program starts with, and what the consumers get from the producer",
          "[codegen][warp-specialize]") {
  // 8 consumer warps + 4: 384 threads start with 168 (ptxas's cap), the producer keeps 40, the consumers rise to
  // 168 + 128·128/256 = 232; the pool is exactly used: 128·40 + 256·232 = 168·384.
  auto r = codegen::register_split(8, 0);
  CHECK(r.entry == 168);
  CHECK(r.consumer == 232);
  CHECK(128 * codegen::kProducerRegisters + 256 * r.consumer <= 384 * r.entry);
  // 4 consumer warps start with 255 (allocated as 256): nothing to raise.
  r = codegen::register_split(4, 1);
  CHECK(r.entry == 255);
  CHECK(r.consumer == 0);
  // Two programs per SM: each has half the registers. 4 warps + 4: 128 at entry, 128 + 128·88/128 = 216.
  r = codegen::register_split(4, 2);
  CHECK(r.entry == 128);
  CHECK(r.consumer == 216);
  // 16 consumer warps: 96 at entry, too few for a wgmma kernel: not specialized (below).
  r = codegen::register_split(16, 0);
  CHECK(r.entry == 96);
  CHECK(r.consumer == 104);
  CHECK(128 * codegen::kProducerRegisters + 512 * r.consumer <= 640 * r.entry);
  CHECK(codegen::register_split(8, 2).entry < codegen::kMinEntryRegisters);
}

TEST_CASE("warp specialization: only loops whose copies are all TMA, and only when asked", "[codegen][warp-specialize]") {
  auto spec = matmul_spec(128, 128, 64, 8, 3);
  auto fn = ir::parse(kernels::builtin_ir("matmul", spec));
  const ir::Op *loop = nullptr;
  loop_loads(*fn, &loop);
  auto opts = options_of(spec);
  opts.warp_specialize = false;
  codegen::LoweringPlan plan = codegen::plan_lowering(*fn, opts);
  CHECK(plan.specialized.empty());
  CHECK(contains(codegen::why_not_specialized(*fn, plan, *loop), "warp specialization is off"));
  opts.warp_specialize = true;
  opts.tma = false;
  plan = codegen::plan_lowering(*fn, opts);
  CHECK(plan.specialized.empty());
  CHECK(contains(codegen::why_not_specialized(*fn, plan, *loop), "every load of the loop's pipeline must be copied by TMA"));
  opts.tma = true;
  opts.num_stages = 1;  // no pipeline
  plan = codegen::plan_lowering(*fn, opts);
  CHECK(plan.specialized.empty());
  CHECK(contains(codegen::why_not_specialized(*fn, plan, *loop), "no software pipeline"));
  opts.num_stages = 3;
  opts.min_ctas_per_sm = 2;  // 384 threads at two programs per SM start with 80 registers
  plan = codegen::plan_lowering(*fn, opts);
  CHECK(plan.specialized.empty());
  CHECK(contains(codegen::why_not_specialized(*fn, plan, *loop), "start with 80 registers per thread, fewer than the 128"));
  opts.min_ctas_per_sm = 0;
  plan = codegen::plan_lowering(*fn, opts);
  CHECK(plan.specialized.count(loop) == 1);
  CHECK(codegen::why_not_specialized(*fn, plan, *loop).empty());
  // The producer computes the loop's bounds and the tiles' starts: program ids, constants, K.
  const std::vector<const ir::Op *> ops = codegen::producer_ops(*fn, plan, *loop);
  CHECK_FALSE(ops.empty());
  for (const ir::Op *op : ops) CHECK(op->kind != ir::OpKind::Load);
}

TEST_CASE("warp specialization: the plan text marks the loop, reads it back, and refuses a mark it cannot follow",
          "[codegen][warp-specialize][layout-text]") {
  auto spec = matmul_spec(128, 256, 64, 8, 3);
  spec.warp_specialize = true;
  LaunchConfig cfg;
  cfg.arch = "sm_90a";
  cfg.num_warps = 8;
  cfg.num_stages = 3;
  cfg.tma = cfg.warp_specialize = true;
  const std::string ir = kernels::builtin_ir("matmul", spec);
  const std::string plan = stage_of_text(ir, "specialize_warps", cfg);
  REQUIRE(contains(plan, "// the lowering plan for sm_90a, 8 warps, 3 stages, TMA copies, warp-specialized"));
  REQUIRE(count_lines(plan, [](auto &l) { return contains(l, " specialized>"); }) == 1);
  CHECK(stage_of_text(plan, "ptx", cfg) == kernels::builtin_ptx("matmul", spec));
  // The dot is left running at 3 stages, which only a fed loop allows (codegen/place_waits.h): unmarked, the loop
  // is not fed and the 'running' mark is refused; both taken off, the loop copies by TMA from thread 0.
  REQUIRE(contains(plan, " running>"));
  std::string unmarked = plan;
  unmarked.replace(unmarked.find(" specialized>"), 13, ">");
  CHECK_THROWS_WITH(stage_of_text(unmarked, "ptx", cfg), Catch::Contains("no 'running' on this value"));
  unmarked.replace(unmarked.find(" running>"), 9, ">");
  const std::string ptx = stage_of_text(unmarked, "ptx", cfg);
  CHECK_FALSE(contains(ptx, "setmaxnreg"));
  CHECK(contains(ptx, "cp.async.bulk.tensor"));
  // On a loop result other than the first (attention's loop carries the row max, the row sum and the output):
  // refused, saying where the mark goes.
  kernels::BuiltinSpec att;
  att.head_dim = 64, att.block_m = 128, att.block_n = 64, att.num_warps = 8, att.num_stages = 3;
  att.tma = att.warp_specialize = true;
  std::string second = stage_of_text(kernels::builtin_ir("attention", att), "specialize_warps", cfg);
  const size_t first_mark = second.find(" specialized>");
  REQUIRE(first_mark != std::string::npos);
  second.replace(first_mark, 13, ">");
  const size_t second_type_end = second.find('>', first_mark + 1);
  REQUIRE(second_type_end != std::string::npos);
  second.insert(second_type_end, " specialized");
  CHECK_THROWS_WITH(stage_of_text(second, "ptx", cfg), Catch::Contains("'specialized' only on a loop's first tile result"));
  // Marked, with b copied by cp.async (and the dot no longer running): refused with the reason.
  std::string mixed = plan;
  mixed.replace(mixed.rfind(" pipelined tma>"), 15, " pipelined>");
  mixed.replace(mixed.find(" running>"), 9, ">");
  CHECK_THROWS_WITH(stage_of_text(mixed, "ptx", cfg),
                    Catch::Contains("no 'specialized' on this value: the producer issues TMA copies only"));
  // On another op's result.
  std::string dot = plan;
  const size_t dot_at = dot.find("= dot ");
  REQUIRE(dot_at != std::string::npos);
  const size_t close = dot.find('>', dot_at);
  dot.insert(close, " specialized");
  CHECK_THROWS_WITH(stage_of_text(dot, "ptx", cfg), Catch::Contains("no 'specialized' on dot's result"));
}

TEST_CASE("warp specialization: attention and flex kernels assemble with a producer warpgroup",
          "[codegen][warp-specialize][flex]") {
  for (bool causal : {false, true})
    for (int d : {64, 128}) {
      INFO((causal ? "causal" : "full") << " d" << d);
      kernels::BuiltinSpec spec;
      spec.head_dim = d, spec.block_m = 128, spec.block_n = 64, spec.num_warps = 8, spec.num_stages = 2;
      spec.causal = causal;
      spec.tma = spec.warp_specialize = true;
      const std::string ptx = kernels::builtin_ptx("attention", spec);
      CHECK(contains(ptx, "setmaxnreg.inc"));
      CHECK(contains(ptx, "cp.async.bulk.tensor.4d"));
      auto [rc, log] = ptxas_v(ptx, "sm_90a", fmt::format("attention_ws_{}_d{}", causal, d));
      INFO(log);
      REQUIRE(rc == 0);
      CHECK_FALSE(contains(log, "warning"));
    }
  // The flex kernel with a soft-cap lambda: both key-block loops (whole blocks, then the last one) are fed.
  attention::FlexOptions opt;
  opt.score_mod = attention::softcap(30.f);
  opt.block_m = 128, opt.block_n = 64, opt.num_warps = 8, opt.num_stages = 2;
  opt.tma = opt.warp_specialize = true;
  opt.arch = "sm_90a";
  const std::string ptx = attention::flex_forward_ptx({.batch = 1, .heads_q = 4, .seqlen_q = 1000, .seqlen_k = 1000,
                                                       .head_dim_qk = 128}, opt);
  CHECK(count_lines(ptx, [](auto &l) { return contains(l, "mbarrier.try_wait.parity"); }) == 4);
  auto [rc, log] = ptxas_v(ptx, "sm_90a", "flex_softcap_ws");
  INFO(log);
  REQUIRE(rc == 0);
  CHECK_FALSE(contains(log, "warning"));
}

TEST_CASE("tma: the flex backward's loops copy their q, dO, k and v tiles by TMA and assemble", "[codegen][tma][flex]") {
  for (int d : {64, 128}) {
    attention::FlexOptions opt;
    opt.block_m = 64, opt.block_n = 128, opt.num_warps = 8, opt.num_stages = 2;
    opt.tma = true;
    opt.arch = "sm_90a";
    const std::string ptx = attention::flex_backward_ptx(
        {.batch = 1, .heads_q = 4, .seqlen_q = 1000, .seqlen_k = 1000, .head_dim_qk = d}, opt);
    INFO("head dim " << d);
    CHECK(contains(ptx, "cp.async.bulk.tensor"));
    CHECK(contains(ptx, "mbarrier.try_wait.parity"));
    // Three modules, one after the other: each assembled alone.
    std::vector<size_t> starts;
    for (size_t at = ptx.find("//\n// Generated by LLVM"); at != std::string::npos;
         at = ptx.find("//\n// Generated by LLVM", at + 1))
      starts.push_back(at);
    REQUIRE(starts.size() == 3);
    starts.push_back(ptx.size());
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      auto [rc, log] = ptxas_v(ptx.substr(starts[i], starts[i + 1] - starts[i]), "sm_90a",
                               fmt::format("flex_backward_tma_d{}_{}", d, i));
      INFO(log);
      REQUIRE(rc == 0);
      CHECK_FALSE(contains(log, "warning"));
    }
  }
}
