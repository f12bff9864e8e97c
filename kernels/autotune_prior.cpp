// Estimates and priors of the built-in kernels' autotuners, kernels/autotune_prior.h.
#include "kernels/autotune_prior.h"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "kernels/launch_options.h"
#include "tilejit/error.h"

namespace tilejit::kernels {
namespace {

int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

std::vector<autotune::Config> parse_all(std::initializer_list<const char *> texts) {
  std::vector<autotune::Config> out;
  for (const char *t : texts) out.push_back(parse_config(t));
  return out;
}

// The winners measured on the H200 (sm_90a), bf16, by the autotuner's full searches (bench/results/LEARNED.md,
// "The autotuner's winners"). Only sm_90a has measurements; f16 runs the same tensor-core code as bf16 and
// shares them.
// Winners of searches without the register-capped (MIN_CTAS) candidates apply when those are off
// (TILEJIT_AUTOTUNE_MORE_PER_SM=0): with them, those configs lost every shape. A num_stages=3 twin of a
// 128x128 head-dim-128 winner is left out: two 32 KiB operand tiles per stage fit the pipeline's 160 KiB only
// twice (codegen/pipeline.cpp), so it compiles to the num_stages=2 kernel.
constexpr const char *kArch = "sm_90a";

// Forward winners on sm_90a, each also with TMA copies and with a producer warpgroup where one fits
// (with_copy_methods): on an H100 (sm_90a) the TMA twin of each cp.async winner beat it at every forward shape
// measured (d 64 and 128, seqlen 1024-16384, causal and not: 5-18% faster), and the producer warpgroup's twin
// tied or beat the TMA one (bench/results/LEARNED.md, "Copy methods"). The tuner times all three.
std::vector<autotune::Config> forward_winners(std::initializer_list<const char *> texts) {
  return with_copy_methods(parse_all(texts), kArch);
}

}  // namespace

autotune::Config parse_config(const std::string &text) {
  autotune::Config c;
  bool warps = false, stages = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t sp = rest.find(' ');
    std::string_view word = rest.substr(0, sp);
    rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp + 1);
    size_t eq = word.find('=');
    int v = 0;
    auto [p, ec] = eq == std::string_view::npos
                       ? std::from_chars_result{word.data(), std::errc::invalid_argument}
                       : std::from_chars(word.data() + eq + 1, word.data() + word.size(), v);
    if (eq == 0 || ec != std::errc() || p != word.data() + word.size())
      throw Error(fmt::format("autotune config '{}': '{}' is not NAME=integer", text, word));
    std::string name(word.substr(0, eq));
    if (name == "num_warps") c.num_warps = v, warps = true;
    else if (name == "num_stages") c.num_stages = v, stages = true;
    else c.constants.emplace_back(name, v);
  }
  if (!warps || !stages) throw Error(fmt::format("autotune config '{}': needs num_warps and num_stages", text));
  return c;
}

autotune::Estimate attention_estimate(const autotune::Config &c, int dim_qk, int dim_v) {
  int bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N"), threads = 32 * c.num_warps;
  autotune::Estimate e;
  e.registers = ceil_div(int64_t(bm) * dim_v + int64_t(bm) * bn, threads) + kReservedRegisters;
  e.shared_bytes = bn * (dim_qk + dim_v) * 2;
  e.min_ctas_per_sm = c.get_or("MIN_CTAS", 0);
  return e;
}

autotune::Estimate matmul_estimate(const autotune::Config &c, int elem_bytes) {
  int bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N"), bk = c.get("BLOCK_K"), threads = 32 * c.num_warps;
  autotune::Estimate e;
  e.registers = ceil_div(int64_t(bm) * bn, threads) + kReservedRegisters;
  e.shared_bytes = (bm * bk + bk * bn) * elem_bytes;
  e.min_ctas_per_sm = c.get_or("MIN_CTAS", 0);
  return e;
}

std::vector<autotune::Config> attention_prior(const std::string &arch, int head_dim, int64_t seqlen_k_bucket,
                                              bool register_capped) {
  // Measured at seqlens 512-16384 (12 shapes per head dim: causal or not, batch·heads = 16384·16/seqlen).
  if (arch != kArch || seqlen_k_bucket < 512) return {};
  if (head_dim == 64 && register_capped)
    return forward_winners({
        "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2",  // non-causal everywhere, causal 16384
        "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=3",  // causal 4096, 8192
        "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2",               // causal 512-2048
    });
  if (head_dim == 64)
    return forward_winners({
        "BLOCK_M=64 BLOCK_N=128 num_warps=4 num_stages=2",   // non-causal 1024, 2048, 16384; causal 2048-8192
        "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2",  // non-causal 4096, 8192
        "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=3",  // causal 16384
        "BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2",   // non-causal 512
        "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2",    // causal 512, 1024
    });
  if (head_dim == 128 && register_capped)
    return forward_winners({
        "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2",  // causal and non-causal 512-8192
        "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2",            // causal and non-causal 16384
    });
  if (head_dim == 128)
    return forward_winners({
        "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2",  // every shape but one (with its num_stages=3 twin)
        "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=2",    // causal 512
    });
  return {};
}

std::vector<autotune::Config> flex_prior(const std::string &arch, int dim_qk, int dim_v, int64_t seqlen_k_bucket,
                                         FlexBandClass band, bool register_capped) {
  // Measured with head dims 128 at seqlens 1024, 4096 and 16384 (batch·heads = 16384·16/seqlen), with no mod,
  // ALiBi, soft-capping 50, a document mask, causal and a causal sliding window of 256.
  if (arch != kArch || dim_qk != 128 || dim_v != 128 || seqlen_k_bucket < 1024) return {};
  if (band == FlexBandClass::Dense && register_capped)
    return forward_winners({
        "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2",  // every mod and seqlen but two
        "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2",            // causal 4096, 16384 (and the s3 twin)
    });
  if (band == FlexBandClass::Dense)
    return forward_winners({
        "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2",  // no mod, ALiBi, soft-cap, causal (and the s3 twin)
        "BLOCK_M=128 BLOCK_N=64 num_warps=4 num_stages=2",   // the document mask
    });
  if (band == FlexBandClass::Narrow && register_capped)
    return forward_winners({
        "BLOCK_M=64 BLOCK_N=32 MIN_CTAS=4 num_warps=4 num_stages=2",  // the causal window of 256, every seqlen
    });
  if (band == FlexBandClass::Narrow)
    return forward_winners({
        "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=2",
        "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=3",
    });
  return {};
}

std::vector<autotune::Config> flex_backward_prior(const std::string &arch, int dim_qk, int dim_v, int64_t seqlen_k_bucket,
                                                  FlexBandClass band, bool atomics) {
  // The tiling: CLI runs at seqlen 4096 (bench/results/LEARNED.md, "Attention backward"), causal and not, without
  // a mod and with ALiBi: on the H200, 64x64 on 4 warps with 2 stages stayed the best at d64 and d128 against
  // 64x128 on 8 warps (2 or 3 stages), 32x64 on 4 warps and 64x64 with 3 stages. The copy method: on an H100
  // at d128 s4096 ("Copy methods on sm_90a"), TMA ran 2-5% faster than cp.async and the producer warpgroup 5%
  // slower; margins that small, measured at one shape, are left to the timing, so all three twins are kept.
  // Only that class: dense or causal, long sequences, dq in its own pass (with atomics the dK/dV kernel holds more
  // and other tilings may win; nobody has measured narrow bands or short sequences).
  if (arch != kArch || dim_qk != dim_v || (dim_qk != 64 && dim_qk != 128)) return {};
  if (seqlen_k_bucket < 2048 || band != FlexBandClass::Dense || atomics) return {};
  return with_copy_methods(parse_all({"BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2"}), kArch);
}

std::vector<autotune::Config> matmul_prior(const std::string &arch, DType dtype, int64_t M, int64_t N, int64_t K) {
  // Measured at 4096³ and 8192³.
  if (arch != kArch || (dtype != DType::bf16 && dtype != DType::f16)) return {};
  if (M < 4096 || N < 4096 || K < 4096) return {};
  return parse_all({
      "BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 num_warps=8 num_stages=2",  // 4096³, 8192³
      "BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 num_warps=8 num_stages=3",
      "BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 num_warps=8 num_stages=2",  // within 3.5% of it
      "BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 num_warps=8 num_stages=3",  // 16384x4096x4096
  });
}

}  // namespace tilejit::kernels
