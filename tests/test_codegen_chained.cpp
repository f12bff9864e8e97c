// PTX checks of chained and deferred wgmma dots (codegen/lower_dot_mma.cpp, Lowering::defer_wgmma) on a DSL
// kernel shaped like the flex kernel's ALiBi through the tensor cores (tests/chained_dot_kernel.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <regex>

#include "chained_dot_kernel.h"
#include "codegen/codegen.h"
#include "test_codegen_util.h"
#include "tilejit/kernels.h"

using namespace tilejit;
using codegen::CodegenOptions;
using codegen::PtxResult;
using codegen::testing::contains;
using codegen::testing::count_lines;
using codegen::testing::ptxas_v;

TEST_CASE("codegen: a wgmma dot continues a running one's accumulators without a wait or fence", "[codegen][mma]") {
  // s = q·kᵀ + af·bf in two key loops (tests/chained_dot_kernel.h): per loop, af·bf (K = 16: A in 32-byte
  // rows, B a loop-invariant operand read by descriptor) is issued and committed, and the q·k wgmmas
  // continue its accumulators at once. Its result is waited for where it is first read.
  auto k = tilejit::testing::chained_dot_kernel();
  DevicePtr p{256, 1 << 20};
  const ir::Function &fn = k.function(p, p, p, p, p, p, 1, 4, 64, 64, 64);
  CodegenOptions opts;
  opts.arch = "sm_90a";
  opts.num_warps = 4;
  opts.num_stages = 2;
  PtxResult r = codegen::compile_to_ptx(fn, opts);
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "chained_dot");
  INFO(log);
  REQUIRE(rc == 0);
  REQUIRE_FALSE(contains(log, "serialized"));  // ptxas C7512: the overlap would be lost
  auto n = [&](const char *s) { return count_lines(r.ptx, [&](auto &l) { return contains(l, s); }); };
  // Per loop: af·bf one m64n64k16, q·k four (K = 64); one commit each, one fence (none for the chain).
  REQUIRE(n("wgmma.mma_async") == 10);
  REQUIRE(n("wgmma.commit_group") == 4);
  REQUIRE(n("wgmma.fence") == 2);
  // Between af·bf's commit and the q·k wgmmas of the same loop there is no wait.
  for (size_t at = r.ptx.find("wgmma.commit_group"), loops = 0; loops < 2; ++loops) {
    size_t next_mma = r.ptx.find("wgmma.mma_async", at), next_wait = r.ptx.find("wgmma.wait_group", at);
    REQUIRE(next_mma < next_wait);
    at = r.ptx.find("wgmma.commit_group", r.ptx.find("wgmma.commit_group", at) + 1);
    at = r.ptx.find("wgmma.commit_group", at + 1);
  }
  // q, af and bf are staged before each loop: the first loop's staging (inside the if) may not have run.
  REQUIRE(n(".shared .align 1024 .b8 tilejit_staged") == 6);
}

namespace {

codegen::PtxResult sm90a(const ir::Function &fn, int warps, int stages) {
  CodegenOptions opts;
  opts.arch = "sm_90a";
  opts.num_warps = warps;
  opts.num_stages = stages;
  return codegen::compile_to_ptx(fn, opts);
}

size_t lines_with(const std::string &text, const char *what) {
  return count_lines(text, [&](auto &l) { return contains(l, what); });
}

}  // namespace

TEST_CASE("codegen: an N-major B read with A from shared memory is one wgmma per 256 columns, and chains", "[codegen][mma]") {
  // BN = 128: af·bf reads A from shared memory and B N-major in two 64-column panels, one m64n128k16 per k step
  // (A read once, not once per panel); q·k is one m64n128k16 per k step too, so it continues af·bf's
  // accumulators: one fence per loop.
  auto k = tilejit::testing::chained_dot_kernel();
  DevicePtr p{256, 1 << 20};
  PtxResult r = sm90a(k.function(p, p, p, p, p, p, 1, 4, 64, 128, 64), 4, 2);
  REQUIRE_FALSE(contains(r.ptx, "m64n64k16"));
  REQUIRE(lines_with(r.ptx, "m64n128k16") == 10);
  REQUIRE(lines_with(r.ptx, "wgmma.fence") == 2);
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "chained_dot_bn128");
  INFO(log);
  REQUIRE(rc == 0);
  REQUIRE_FALSE(contains(log, "serialized"));
}

TEST_CASE("codegen: wgmma dots of different instruction shapes are not chained", "[codegen][mma]") {
  // p·b reads A from registers (p is a dot's result, in the MMA layout) and B N-major: one m64n64k16 per
  // 64-column panel. q·kᵀ (K-major B) is one m64n128k16: the hardware orders accumulator accesses only between
  // wgmmas of one shape, so q·kᵀ fences and waits instead of continuing p·b's accumulators.
  auto k = Kernel("shapes", [](Ptr<bf16> Q, Ptr<bf16> Kp, Ptr<bf16> A, Ptr<bf16> G, Ptr<bf16> B, Ptr<f32> O) {
    Tile r = arange(0, 64), c16 = arange(0, 16), c64 = arange(0, 64), c128 = arange(0, 128);
    Tile p = cast(dot(load(A + r(_, None) * 16 + c16(None, _)), load(G + c16(_, None) * 16 + c16(None, _))), DType::bf16);
    Tile pb = dot(p, load(B + c16(_, None) * 128 + c128(None, _)));
    Tile q = load(Q + r(_, None) * 64 + c64(None, _)), kk = load(Kp + c128(_, None) * 64 + c64(None, _));
    store(O + r(_, None) * 128 + c128(None, _), dot(q, trans(kk), pb));
  });
  DevicePtr p{256, 1 << 20};
  PtxResult r = sm90a(k.function(p, p, p, p, p, p), 4, 2);
  REQUIRE(lines_with(r.ptx, "m64n64k16") == 2);   // p·b: one k step, two panels
  REQUIRE(lines_with(r.ptx, "m64n128k16") == 4);  // q·kᵀ: four k steps
  REQUIRE(lines_with(r.ptx, "wgmma.fence") == 2);  // p·b and q·kᵀ (a·g, N = 16, is mma.sync): not chained
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "shapes");
  INFO(log);
  REQUIRE(rc == 0);
}

TEST_CASE("codegen: a dot-free loop after the dot left running leaves its group running", "[codegen][mma]") {
  // The K loop's dot is left running (4 stages); the loop after it in the same body has no dot, so it waits for
  // nothing, and the iteration still ends with wgmma.wait_group 1.
  auto k = Kernel("dot_then_loop", [](Ptr<bf16> A, Ptr<bf16> B, Ptr<f32> O, Ptr<i32> T, I32 n) {
    Tile r = arange(0, 64), kk = arange(0, 32), c = arange(0, 64);
    Tile acc = zeros({64, 64}, DType::f32);
    for_range(0, n, 1, [&](I32 j) {
      Tile a = load(A + j * 32 + r(_, None) * 1024 + kk(None, _));
      Tile b = load(B + (j * 32 + kk)(_, None) * 64 + c(None, _));
      acc = dot(a, b, acc);
      for_range(0, 4, 1, [&](I32 t) { store(T + j * 4 + t, t); });
    });
    store(O + r(_, None) * 64 + c(None, _), acc);
  });
  DevicePtr p{256, 1 << 20};
  PtxResult r = sm90a(k.function(p, p, p, p, 8), 4, 4);
  REQUIRE(contains(r.ptx, "wgmma.wait_group.sync.aligned 1;"));
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "dot_then_loop");
  INFO(log);
  REQUIRE(rc == 0);
  REQUIRE_FALSE(contains(log, "serialized"));
}

TEST_CASE("codegen: more than eight running wgmma dots wait with wait_group 7 at most", "[codegen][mma]") {
  // Nine dots issued before the first is read: the first needs eight newer groups left running, which
  // wait_group cannot say (0..7); waiting for one more is still correct.
  auto k = Kernel("nine_dots", [](Ptr<bf16> A, Ptr<bf16> B, Ptr<f32> O, I32 n) {
    Tile r = arange(0, 64), c = arange(0, 16), kk = arange(0, 64);
    Tile tot = zeros({64, 16}, DType::f32);
    for_range(0, n, 1, [&](I32 j) {
      Tile bk = load(B + (j * 16 + c)(_, None) * 64 + kk(None, _));
      std::vector<Tile> s;
      for (int i = 0; i < 9; ++i) s.push_back(dot(load(A + i * 4096 + j * 64 + r(_, None) * 4096 + kk(None, _)), trans(bk)));
      for (const Tile &x : s) tot = tot + x;
    });
    store(O + r(_, None) * 16 + c(None, _), tot);
  });
  DevicePtr p{256, 1 << 20};
  PtxResult r = sm90a(k.function(p, p, p, 4), 4, 2);
  REQUIRE(lines_with(r.ptx, "wgmma.commit_group") == 9);
  REQUIRE(contains(r.ptx, "wgmma.wait_group.sync.aligned 7;"));
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "nine_dots");
  INFO(log);
  REQUIRE(rc == 0);
}

TEST_CASE("codegen: a loop-invariant operand read by a wgmma dot and by one that cannot use wgmma compiles",
          "[codegen][mma]") {
  // A [64, 16] staged once before the loop: in wgmma's row order for the N = 64 dot, which the N = 32 dot
  // (no wgmma: N-major B needs 64 columns) cannot read, so it restages it. Likewise B [64, 64] staged for
  // ldmatrix by a 16-row dot is restaged for the 64-row dot's wgmma.
  auto shared_a = tilejit::testing::shared_a_kernel();
  auto shared_b = tilejit::testing::shared_b_kernel();
  DevicePtr p{256, 1 << 20};
  for (int stages : {1, 2}) {
    INFO("num_stages " << stages);
    PtxResult ra = sm90a(shared_a.function(p, p, p, p, p, 4), 4, stages);
    PtxResult rb = sm90a(shared_b.function(p, p, p, p, p, 4), 4, stages);
    REQUIRE(contains(ra.ptx, "wgmma.mma_async"));
    REQUIRE(contains(rb.ptx, "wgmma.mma_async"));
    for (auto *r : {&ra, &rb}) {
      auto [rc, log] = ptxas_v(r->ptx, "sm_90a", r == &ra ? "shared_a" : "shared_b");
      INFO(log);
      REQUIRE(rc == 0);
    }
  }
}

TEST_CASE("codegen: an inner loop's operands staged in an outer loop's body come after a barrier", "[codegen]") {
  // x changes every outer iteration and is the inner loop's loop-invariant A: its staging overwrites the
  // copy other warps may still read in their last inner iteration, unless all warps meet first.
  auto k = Kernel("outer_inner", [](Ptr<bf16> X, Ptr<bf16> K, Ptr<f32> O, I32 n, I32 m) {
    Tile r = arange(0, 128), c = arange(0, 64);
    Tile tot = zeros({128, 64}, DType::f32);
    for_range(0, n, 1, [&](I32 i) {
      Tile x = load(X + i * 8192 + r(_, None) * 64 + c(None, _));
      Tile acc = zeros({128, 64}, DType::f32);
      for_range(0, m, 1, [&](I32 j) {
        Tile kk = load(K + j * 4096 + c(_, None) * 64 + c(None, _));
        acc = dot(x, trans(kk), acc);
      });
      tot = tot + acc;
    });
    store(O + r(_, None) * 64 + c(None, _), tot);
  });
  DevicePtr p{256, 1 << 20};
  CodegenOptions opts;
  opts.arch = "sm_90a";
  opts.num_warps = 8;
  opts.num_stages = 1;  // no pipeline prologue (which has a barrier of its own)
  std::string ll = codegen::emit_llvm_ir(k.function(p, p, p, 4, 3), opts);
  size_t use = ll.find("@tilejit_staged, i32");  // the first staging store's address
  REQUIRE(use != std::string::npos);
  // The start of the basic block holding it: the last line before it that begins with a label ("name:").
  size_t label = std::string::npos;
  for (size_t at = ll.rfind('\n', use); at != std::string::npos && at > 0; at = ll.rfind('\n', at - 1)) {
    size_t colon = ll.find(':', at + 1), eol = ll.find('\n', at + 1);
    if (ll[at + 1] != ' ' && ll[at + 1] != '\n' && colon < eol) {
      label = at + 1;
      break;
    }
  }
  REQUIRE(label != std::string::npos);
  INFO(ll.substr(label, ll.find('\n', label) - label));
  size_t barrier = ll.find("@llvm.nvvm.barrier0()", label);
  REQUIRE(barrier < use);  // in the same basic block, before the store
  REQUIRE_NOTHROW(sm90a(k.function(p, p, p, 4, 3), 8, 1));
}

namespace {

/// The text of the first loop whose body issues a wgmma: from its header label to the branch back to it.
std::string first_wgmma_loop(const std::string &ptx) {
  size_t mma = ptx.find("wgmma.mma_async");
  size_t label = ptx.rfind("\n$L__BB", mma);
  REQUIRE(label != std::string::npos);
  std::string name = ptx.substr(label + 1, ptx.find(':', label) - label - 1);
  size_t back = ptx.find("bra.uni \t" + name + ";", mma);
  if (back == std::string::npos) back = ptx.find("bra \t" + name + ";", mma);
  REQUIRE(back != std::string::npos);
  return ptx.substr(label, back - label);
}

}  // namespace

TEST_CASE("codegen: a pipelined A operand is copied in wgmma's row order and read from its stage buffer",
          "[codegen][mma][pipeline]") {
  // matmul's acc = dot(a, b, acc) with a and b in stage buffers on 8 warps: the wgmma reads a by descriptor
  // (the two-descriptor form, no ldmatrix). With 2 or 3 stages the copies run S-1 iterations ahead and each
  // iteration waits for its group before the next refill overwrites the buffer it read; with 4 or more the dot
  // is left running (codegen/place_waits.h): each iteration ends with wgmma.wait_group 1, the copies run S-2
  // iterations ahead, and ptxas keeps the accumulators in place across the back edge (no serialization).
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  spec.num_warps = 8;
  for (auto [bm, bn, bk] : {std::array{128, 128, 64}, std::array{128, 256, 64}, std::array{128, 256, 32}})
    for (int stages : {2, 3, 4, 5}) {
      if ((bm + bn) * bk * 2 * stages > kMaxPipelineBytes) continue;  // compiles with fewer stages
      spec.block_m = bm, spec.block_n = bn, spec.block_k = bk, spec.num_stages = stages;
      std::string ptx = kernels::builtin_ptx("matmul", spec);
      INFO(bm << "x" << bn << "x" << bk << ", num_stages " << stages);
      std::string loop = first_wgmma_loop(ptx);
      REQUIRE_FALSE(contains(ptx, "ldmatrix"));
      REQUIRE(std::regex_search(loop, std::regex(R"(wgmma\.mma_async[^;]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 1;)")));
      const bool running = stages >= 4;
      const int ahead = stages - 1 - running;
      REQUIRE(contains(loop, fmt::format("wgmma.wait_group.sync.aligned {};", running ? 1 : 0)));
      REQUIRE_FALSE(contains(loop, fmt::format("wgmma.wait_group.sync.aligned {};", running ? 0 : 1)));
      REQUIRE(contains(loop, fmt::format("cp.async.wait_group {};", ahead - 1)));
      auto [rc, log] = ptxas_v(ptx, "sm_90a", fmt::format("matmul_{}x{}x{}_s{}", bm, bn, bk, stages));
      INFO(log);
      REQUIRE(rc == 0);
      REQUIRE_FALSE(contains(log, "serialized"));
      REQUIRE(contains(log, "0 bytes spill stores"));
    }
}
