// Tensor cores in codegen: the MMA accumulator layout and the operand swizzle checked against brute force,
// and the built-in kernels' PTX (attention, matmul) using mma.sync + ldmatrix with no spills under ptxas.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <regex>
#include <set>

#include "codegen/mma.h"
#include "test_codegen_util.h"
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
  for (int64_t cols : {8, 16, 32, 64, 128, 256}) {
    for (int64_t row = 0; row < 64; ++row) {
      std::set<int64_t> offs;
      for (int64_t c = 0; c < cols; ++c) {
        int64_t o = swizzled_offset(row, c, cols);
        REQUIRE(o / cols == row);
        if (c % 8) REQUIRE(o == swizzled_offset(row, c - 1, cols) + 1);  // 16-byte chunks stay whole
        offs.insert(o);
      }
      REQUIRE(int64_t(offs.size()) == cols);
    }
    // ldmatrix: 8 consecutive rows (starting at a multiple of 8) read the same logical chunk; their 16-byte
    // units must land in 8 distinct positions of a 128-byte line (32 banks of 4 bytes).
    for (int64_t row0 = 0; row0 < 64; row0 += 8)
      for (int64_t chunk = 0; chunk < cols / 8; ++chunk) {
        std::set<int64_t> units;
        for (int64_t r = row0; r < row0 + 8; ++r) units.insert((swizzled_offset(r, chunk * 8, cols) * 2 / 16) % 8);
        INFO("cols " << cols << " rows " << row0 << "+8 chunk " << chunk);
        REQUIRE(units.size() == 8);
      }
  }
}

namespace {

// ptxas -v for arch; returns (exit status, log).
std::pair<int, std::string> ptxas_v(const std::string &ptx, const std::string &arch, const std::string &tag) {
  auto file = dump_ptx(ptx, tag + "_" + arch);
  auto cubin = file;
  cubin.replace_extension(".cubin");
  std::string cmd = fmt::format("{} -v -arch={} {} -o {} 2>&1", ptxas_binary(), arch, file.string(), cubin.string());
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// max_spill: spill bytes tolerated (0: none and no stack frame).
void check_tensor_core_kernel(const std::string &name, kernels::BuiltinSpec spec, const std::string &tag,
                              int max_spill = 0) {
  for (std::string arch : {"sm_80", "sm_90a"}) {
    spec.arch = arch;
    std::string ptx = kernels::builtin_ptx(name, spec);
    INFO(tag << " for " << arch);
    REQUIRE(contains(ptx, "mma.sync.aligned.m16n8k16.row.col.f32"));
    REQUIRE(contains(ptx, "ldmatrix.sync.aligned.m8n8.x4"));
    REQUIRE_FALSE(contains(ptx, "fma.rn.f32"));  // no scalar dot left
    auto [rc, log] = ptxas_v(ptx, arch, tag);
    INFO("ptxas says:\n" << log);
    REQUIRE(rc == 0);
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

TEST_CASE("attention and matmul at default configs use mma.sync and ldmatrix without spills", "[codegen][mma][ptx]") {
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
      // KNOWN GAP: head_dim 128 at the default 64x64 blocks and 4 warps needs ~255 registers and spills a
      // few dozen bytes (the unrolled k16 steps let ldmatrix loads run ahead); bounded here, not yet zero.
      check_tensor_core_kernel("attention", spec, fmt::format("mma_attention_d{}_{}", d, causal), d == 128 ? 160 : 0);
    }
}
