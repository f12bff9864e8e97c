// Tensor cores in codegen: the MMA accumulator layout and the operand swizzle checked against brute force,
// and the built-in kernels' PTX (attention, matmul) using mma.sync + ldmatrix with no spills under ptxas.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/mma.h"
#include "test_codegen_util.h"
#include "tilejit/attention.h"
#include "tilejit/kernels.h"

using namespace tilejit;
using namespace tilejit::codegen;
using namespace tilejit::codegen::testing;

TEST_CASE("mma layout: every (thread, register) holds the m16n8k16 C-fragment element", "[codegen][mma]") {
  for (int W : {1, 2, 4, 8})
    for (int64_t M : {16, 32, 64, 128})
      for (int64_t N : {8, 16, 64, 128}) {
        auto l = mma_layout({M, N}, W);
        int wm = int(std::min<int64_t>(W, M / 16)), wn = W / wm;
        if (N < 8 * wn) {
          REQUIRE_FALSE(l.has_value());
          continue;
        }
        REQUIRE(l.has_value());
        INFO(l->str());
        int64_t MT = M / (16 * wm), NT = N / (8 * wn);
        REQUIRE(l->num_regs() == MT * NT * 4);
        std::map<std::pair<int64_t, int64_t>, int> seen;
        for (int tid = 0; tid < 32 * W; ++tid) {
          int lane = tid % 32, warp = tid / 32, wmi = warp / wn, wni = warp % wn;
          REQUIRE(l->is_owner(tid));  // no replication
          for (int64_t mt = 0; mt < MT; ++mt)
            for (int64_t nt = 0; nt < NT; ++nt)
              for (int i = 0; i < 4; ++i) {
                int64_t r = (2 * mt + i / 2) * (2 * NT) + 2 * nt + (i & 1);
                int64_t row = 8 * wmi + lane / 4 + 8 * wm * (2 * mt + i / 2);
                int64_t col = 8 * wni + 2 * (lane % 4) + (i & 1) + 8 * wn * nt;
                REQUIRE(l->coord(tid, r) == std::vector<int64_t>{row, col});
                ++seen[{row, col}];
              }
        }
        REQUIRE(int64_t(seen.size()) == M * N);  // each element exactly once
        for (auto &[rc, n] : seen) REQUIRE(n == 1);
        // Row reductions stay inside a warp when warps only tile M (attention's softmax).
        if (wn == 1) REQUIRE(slice_layout(*l, 1).warp_replication_mask() == 0);
      }
}

TEST_CASE("mma operand swizzle: a permutation within each row, conflict-free ldmatrix row groups", "[codegen][mma]") {
  constexpr int64_t rows = 64;
  for (int64_t cols : {8, 16, 32, 64, 128, 256}) {
    std::set<int64_t> all;
    for (int64_t row = 0; row < rows; ++row) {
      std::set<int64_t> offs;
      for (int64_t c = 0; c < cols; ++c) {
        int64_t o = swizzled_offset(row, c, cols, rows);
        int64_t w = std::min<int64_t>(cols, 64);  // panel width
        REQUIRE(o / (rows * w) == c / w);          // the panel of its column
        REQUIRE(o % (rows * w) / w == row);        // its row inside the panel
        if (c % 8) REQUIRE(o == swizzled_offset(row, c - 1, cols, rows) + 1);  // 16-byte chunks stay whole
        offs.insert(o);
        all.insert(o);
      }
      REQUIRE(int64_t(offs.size()) == cols);
    }
    REQUIRE(int64_t(all.size()) == rows * cols);
    REQUIRE(*all.rbegin() == rows * cols - 1);
    // wgmma's 128-byte swizzle (64 columns): byte address bits [4:6] are XORed with bits [7:9].
    if (cols >= 64)
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t c = 0; c < cols; c += 8) {
          int64_t plain = (c / 64) * rows * 128 + row * 128 + (c % 64) * 2;  // unswizzled byte offset
          int64_t want = plain ^ (((plain >> 7) & 7) << 4);
          REQUIRE(swizzled_offset(row, c, cols, rows) * 2 == want);
        }
    // ldmatrix: 8 consecutive rows (starting at a multiple of 8) read the same logical chunk; their 16-byte
    // units must land in 8 distinct positions of a 128-byte line (32 banks of 4 bytes).
    for (int64_t row0 = 0; row0 < 64; row0 += 8)
      for (int64_t chunk = 0; chunk < cols / 8; ++chunk) {
        std::set<int64_t> units;
        for (int64_t r = row0; r < row0 + 8; ++r) units.insert((swizzled_offset(r, chunk * 8, cols, rows) * 2 / 16) % 8);
        INFO("cols " << cols << " rows " << row0 << "+8 chunk " << chunk);
        REQUIRE(units.size() == 8);
      }
  }
}

namespace {

// max_spill: spill bytes tolerated (0: none and no stack frame).
void check_tensor_core_kernel(const std::string &name, kernels::BuiltinSpec spec, const std::string &tag,
                              int max_spill = 0) {
  for (std::string arch : {"sm_80", "sm_90a"}) {
    spec.arch = arch;
    std::string ptx = kernels::builtin_ptx(name, spec);
    INFO(tag << " for " << arch);
    if (arch == "sm_90a") {  // every dot of these configs qualifies for wgmma (B from shared memory)
      REQUIRE(contains(ptx, "wgmma.mma_async.sync.aligned.m64n"));
      REQUIRE(contains(ptx, "wgmma.fence.sync.aligned"));
      REQUIRE(contains(ptx, "wgmma.wait_group.sync.aligned 0"));
      REQUIRE(contains(ptx, "fence.proxy.async.shared::cta"));
      REQUIRE_FALSE(contains(ptx, "mma.sync.aligned.m16n8k16"));
      // A is read by the wgmma from shared memory (attention's loop-invariant q, staged before the loop;
      // matmul's a, from its stage buffer): the two-descriptor form, and no ldmatrix at all (attention's p is
      // reused from registers, B comes by descriptor, K- or N-major).
      REQUIRE(std::regex_search(ptx, std::regex(R"(wgmma\.mma_async[^;]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, [01];)")));
      REQUIRE_FALSE(contains(ptx, "ldmatrix"));
      if (name == "attention") REQUIRE(contains(ptx, ".shared .align 1024 .b8 tilejit_staged"));
    } else {
      REQUIRE(contains(ptx, "mma.sync.aligned.m16n8k16.row.col.f32"));
      REQUIRE_FALSE(contains(ptx, "wgmma"));
      REQUIRE(contains(ptx, "ldmatrix.sync.aligned.m8n8.x4"));  // the A and B operands
    }
    // No scalar dot left: that would be M·N·K/threads fma per dot (thousands); the softmax has one per score.
    size_t fmas = 0;
    for (size_t p = ptx.find("fma.rn.f32"); p != std::string::npos; p = ptx.find("fma.rn.f32", p + 1)) ++fmas;
    REQUIRE(fmas <= 160);
    auto [rc, log] = ptxas_v(ptx, arch, tag);
    INFO("ptxas says:\n" << log);
    REQUIRE(rc == 0);
    REQUIRE_FALSE(contains(log, "serialized"));  // ptxas would serialize wgmmas it cannot prove safe
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex(R"((\d+) bytes spill stores)")));
    if (max_spill == 0) {
      REQUIRE(contains(log, "0 bytes spill stores"));
      REQUIRE(contains(log, "0 bytes spill loads"));
      REQUIRE(contains(log, "0 bytes stack frame"));
    } else {
      REQUIRE(std::stoi(m[1].str()) <= max_spill);
    }
  }
}

}  // namespace

TEST_CASE("attention and matmul at default configs use mma.sync + ldmatrix (sm_80) or wgmma (sm_90a) without spills", "[codegen][mma][ptx]") {
  kernels::BuiltinSpec spec;
  for (DType dt : {DType::bf16, DType::f16}) {
    spec.dtype = dt;
    check_tensor_core_kernel("matmul", spec, fmt::format("mma_matmul_{}", dtype_name(dt)));
  }
  spec.dtype = DType::bf16;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      spec.head_dim = d;
      spec.causal = causal;
      // The default num_stages 2 keeps K and V out of registers (cp.async): no spills at head_dim 128 either.
      check_tensor_core_kernel("attention", spec, fmt::format("mma_attention_d{}_{}", d, causal));
      // The register path (num_stages 1) at head_dim 128 needs ~255 registers and spills a few dozen bytes.
      spec.num_stages = 1;
      check_tensor_core_kernel("attention", spec, fmt::format("mma_attention_s1_d{}_{}", d, causal), d == 128 ? 160 : 0);
      spec.num_stages = kernels::BuiltinSpec{}.num_stages;
    }
}

namespace {

int count_of(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

int barriers(const std::string &ptx) { return count_of(ptx, "bar.sync") + count_of(ptx, "barrier.sync"); }

}  // namespace

TEST_CASE("pipelined loops: dot operand loads become cp.async into stage buffers, one barrier per iteration",
          "[codegen][mma][pipeline]") {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      spec.num_stages = 1;
      spec.head_dim = d;
      spec.causal = causal;
      const int register_path_barriers = barriers(kernels::builtin_ptx("attention", spec));
      for (int stages : {1, 2, 3}) {
        spec.num_stages = stages;
        spec.head_dim = d;
        spec.causal = causal;
        std::string ptx = kernels::builtin_ptx("attention", spec);
        INFO("attention d" << d << (causal ? " causal" : "") << ", num_stages " << stages);
        if (stages == 1) {  // the register path: K and V staged by every thread, two barriers per dot
          REQUIRE_FALSE(contains(ptx, "cp.async"));
          REQUIRE(barriers(ptx) >= 5);
          continue;
        }
        REQUIRE(contains(ptx, "cp.async.cg.shared.global"));
        REQUIRE(contains(ptx, "cp.async.commit_group"));
        REQUIRE(contains(ptx, fmt::format("cp.async.wait_group {}", stages - 2)));
        REQUIRE(contains(ptx, "cp.async.wait_group 0"));
        // The register path has 4 per loop body (2 per dot); the pipeline has 1 at the top of the body plus 1
        // before its prologue. Attention has one loop over the key blocks.
        REQUIRE(barriers(ptx) == register_path_barriers - 2);
        // K and V tiles each: BLOCK_N·d·2 bytes per stage, in dynamic shared memory.
        REQUIRE(contains(ptx, ".extern .shared .align 16 .b8 tilejit_smem[]"));
      }
    }
  spec.dtype = DType::bf16;
  spec.num_stages = 3;
  std::string mm = kernels::builtin_ptx("matmul", spec);
  REQUIRE(contains(mm, "cp.async.cg.shared.global"));
  spec.num_stages = 1;
  // The register path stages a and b between 2 barriers per iteration; the pipeline has 1 per iteration plus
  // 1 before its prologue (the other 2 convert the accumulator for the store after the loop).
  REQUIRE(barriers(mm) == barriers(kernels::builtin_ptx("matmul", spec)));
  REQUIRE(barriers(mm) <= 4);
}

TEST_CASE("pipelined attention (3 stages, 128x64 with 8 warps) and matmul assemble for sm_80 and sm_90a without spills", "[codegen][mma][ptx][pipeline]") {
  kernels::BuiltinSpec spec;
  spec.num_stages = 3;
  spec.dtype = DType::f16;
  check_tensor_core_kernel("matmul", spec, "pipe3_matmul_f16");
  spec.dtype = DType::bf16;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      spec.head_dim = d;
      spec.causal = causal;
      check_tensor_core_kernel("attention", spec, fmt::format("pipe3_attention_d{}_{}", d, causal));
    }
  spec.block_m = 128;  // the 8-warp config
  spec.num_warps = 8;
  spec.num_stages = 2;
  for (int d : {64, 128}) {
    spec.head_dim = d;
    check_tensor_core_kernel("attention", spec, fmt::format("pipe2_attention_bm128_d{}", d));
  }
}

TEST_CASE("min_ctas_per_sm: .maxntid/.minnctapersm in the PTX, two 8-warp programs per SM fit without spills",
          "[codegen][occupancy]") {
  attention::Shape s{4, 16, 1024, 1024, 128};
  attention::Options o;
  o.block_m = 128;
  o.block_n = 64;
  o.num_warps = 8;
  o.num_stages = 2;
  o.arch = "sm_90a";
  std::string one = attention::forward_ptx(s, o);
  REQUIRE_FALSE(contains(one, ".minnctapersm"));
  o.min_ctas_per_sm = 2;
  std::string two = attention::forward_ptx(s, o);
  REQUIRE(contains(two, ".maxntid 256, 1, 1"));
  REQUIRE(contains(two, ".minnctapersm 2"));
  auto [rc, log] = ptxas_v(two, "sm_90a", "minctas2");
  INFO("ptxas says:\n" << log);
  REQUIRE(rc == 0);
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex(R"(Used (\d+) registers)")));
  CHECK(std::stoi(m[1].str()) <= 128);  // 65536 registers / (2 programs · 256 threads)
  CHECK(contains(log, "0 bytes spill stores"));
}

TEST_CASE("on sm_90a a kernel whose dots cannot run on wgmma lowers as on sm_80: no async-proxy fences, A kept in registers",
          "[codegen][mma][ptx]") {
  // 16-row blocks with 4 warps put the warps side by side along N (warps_per_cta {1, 4}), which wgmma cannot
  // issue; decode's GQA-packed blocks have this shape. The kernel must then pay nothing for wgmma: no
  // fence.proxy.async before its barriers (it waits for the thread's outstanding loads), no 1024-byte aligned
  // staging, the same code as on sm_80.
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  spec.head_dim = 128;
  spec.block_m = 16;
  spec.num_stages = 3;
  for (const char *name : {"attention", "matmul"}) {
    INFO(name);
    spec.arch = "sm_90a";
    const std::string h = kernels::builtin_ptx(name, spec);
    REQUIRE(contains(h, "mma.sync.aligned.m16n8k16.row.col.f32"));
    REQUIRE_FALSE(contains(h, "wgmma"));
    REQUIRE_FALSE(contains(h, "fence.proxy.async"));
    REQUIRE_FALSE(contains(h, ".align 1024"));
    spec.arch = "sm_80";
    const std::string a = kernels::builtin_ptx(name, spec);
    // The same instructions (counted by opcode: scheduling may order them differently) apart from sm_90's wait
    // for the previous grid (codegen::waits_for_prior_grid).
    auto opcodes = [](const std::string &ptx) {
      std::map<std::string, int> count;
      std::istringstream lines(ptx.substr(ptx.find(".address_size")));
      for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string op;
        if (words >> op && op.find("griddepcontrol") == std::string::npos && op.rfind("//", 0) != 0) ++count[op];
      }
      return count;
    };
    REQUIRE(contains(h, "griddepcontrol.wait;"));
    REQUIRE(opcodes(h) == opcodes(a));
    auto [rc, log] = ptxas_v(h, "sm_90a", std::string(name) + "_block_m16");
    INFO("ptxas says:\n" << log);
    REQUIRE(rc == 0);
  }
  // A bad num_warps is reported before the wgmma decision looks at the dots' layouts.
  for (int warps : {0, 3}) {
    kernels::BuiltinSpec bad = spec;
    bad.num_warps = warps;
    bad.arch = "sm_90a";
    REQUIRE_THROWS_WITH(kernels::builtin_ptx("matmul", bad), Catch::Matchers::Contains("num_warps must be a power of two"));
  }
  // The same kernel with 64-row blocks keeps wgmma and its fences.
  spec.block_m = 64;
  spec.arch = "sm_90a";
  const std::string w = kernels::builtin_ptx("attention", spec);
  REQUIRE(contains(w, "wgmma.mma_async"));
  REQUIRE(contains(w, "fence.proxy.async.shared::cta"));
}
