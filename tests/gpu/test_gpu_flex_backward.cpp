// flex_backward on the GPU (ctest label `gpu`): the interpreter's checks on larger shapes and both head dims
// of the benchmarks, GQA, odd lengths, and 20 runs bitwise identical.
#include "flex_backward_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {
FlexCase gpu_case(int heads_q, int heads_kv, int sq, int sk, int d, DType dt, int block_m, int block_n) {
  FlexCase c;
  c.shape = {.batch = 2, .heads_q = heads_q, .heads_kv = heads_kv, .seqlen_q = sq, .seqlen_k = sk, .head_dim_qk = d};
  c.dtype = dt;
  c.block_m = block_m;
  c.block_n = block_n;
  return c;
}
}  // namespace

TEST_CASE("flex_backward on the GPU: every mod and mask kind", "[gpu][flex][backward]") {
  check_backward_variants(Backend::GPU, gpu_case(4, 2, 257, 301, 64, DType::bf16, 64, 64));
  check_backward_variants(Backend::GPU, gpu_case(2, 1, 130, 130, 128, DType::f16, 64, 32));
}

TEST_CASE("flex_backward on the GPU: GQA, odd lengths, varlen, head dims", "[gpu][flex][backward]") {
  for (int len : {1, 17, 113, 1000}) {
    INFO("seqlen " << len);
    attention::FlexOptions o;
    o.mask = attention::causal(attention::Align::BottomRight);
    FlexCase c = gpu_case(8, 2, len, len, 64, DType::bf16, 64, 64);
    require_backward_matches(run_backward_case(Backend::GPU, c, o, {{}, band_visible({-1, 0, attention::Align::BottomRight})}),
                             c.dtype);
  }
  {
    INFO("varlen");
    FlexCase c = gpu_case(8, 2, 0, 0, 64, DType::bf16, 64, 64);
    c.seqlens_q = {100, 0, 1, 513, 64};
    c.seqlens_k = {100, 7, 1, 513, 200};
    attention::FlexOptions o;
    o.mask = attention::causal(attention::Align::BottomRight);
    require_backward_matches(run_backward_case(Backend::GPU, c, o, {{}, band_visible({-1, 0, attention::Align::BottomRight})}),
                             c.dtype);
  }
  for (int d : {32, 96, 128, 192, 256}) {
    INFO("head dim " << d);
    FlexCase c = gpu_case(4, 4, 200, 77, d, DType::bf16, 64, 64);
    require_backward_matches(run_backward_case(Backend::GPU, c, attention::FlexOptions{}, {}), c.dtype);
  }
  for (int d : {64, 128}) {
    INFO("token-major [batch, seqlen, heads, d] (the sequence strides compiled in), head dim " << d);
    FlexCase c = gpu_case(8, 2, 300, 513, d, DType::bf16, 64, 64);
    c.token_major = true;
    attention::FlexOptions o;
    o.mask = attention::causal(attention::Align::BottomRight);
    require_backward_matches(run_backward_case(Backend::GPU, c, o, {{}, band_visible({-1, 0, attention::Align::BottomRight})}),
                             c.dtype);
  }
}

TEST_CASE("flex_backward on the GPU: block shapes and warp counts that take the other tensor-core paths",
          "[gpu][flex][backward]") {
  // 8 warps on 64-row tiles: no dot fits wgmma (mma.sync, transposed operands read with ldmatrix.trans);
  // 128-key blocks on 4 warps: two m16 tiles per warp in wgmma's row order; 32-row query blocks: mixed;
  // 128-key blocks on 8 warps: both kernels on two warpgroups (the dQ kernel owns 128 queries), K and V of
  // the key block staged in dynamic shared memory at d128 (past the static limit).
  const struct {
    int block_m, block_n, num_warps;
  } configs[] = {{64, 64, 8}, {64, 128, 4}, {32, 64, 4}, {128, 128, 8}, {64, 128, 8}};
  for (auto cfg : configs) {
    for (int d : {64, 128}) {
      INFO("BLOCK_M " << cfg.block_m << ", BLOCK_N " << cfg.block_n << ", " << cfg.num_warps << " warps, d " << d);
      FlexCase c = gpu_case(4, 2, 300, 333, d, DType::bf16, cfg.block_m, cfg.block_n);
      for (bool atomics : {false, true}) {
        attention::FlexOptions o;
        o.num_warps = cfg.num_warps;
        o.atomics = atomics;
        o.mask = attention::causal(attention::Align::BottomRight);
        require_backward_matches(
            run_backward_case(Backend::GPU, c, o, {{}, band_visible({-1, 0, attention::Align::BottomRight})}), c.dtype);
      }
    }
  }
}

TEST_CASE("flex_backward on the GPU: 20 runs give bitwise the same dq, dk, dv and capture gradient", "[gpu][flex][backward]") {
  check_backward_deterministic(Backend::GPU, gpu_case(8, 2, 513, 513, 128, DType::bf16, 64, 64), 20);
}
