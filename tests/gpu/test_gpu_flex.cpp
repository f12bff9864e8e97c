// Flex attention on the GPU (ctest label `gpu`): the same checks as the interpreter tests on larger
// shapes, every head dim (32…256, with 96 and 192 padded), and a timing sanity check that the sliding
// window's cost follows the visible area.
#include <chrono>

#include "flex_checks.h"
#include "tilejit/timer.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("flex on the GPU: every variant", "[gpu][flex]") {
  for (int len : {1, 17, 113, 1000})
    check_flex_variants(Backend::GPU, {.batch = 2, .heads_q = 3, .seqlen_q = len, .seqlen_k = len, .head_dim_qk = 64},
                        DType::bf16, 64, 64);
  check_flex_variants(Backend::GPU, {.batch = 1, .heads_q = 4, .seqlen_q = 300, .seqlen_k = 129, .head_dim_qk = 128},
                      DType::f16, 128, 64);
  check_flex_variants(Backend::GPU, {.batch = 1, .heads_q = 2, .seqlen_q = 77, .seqlen_k = 513, .head_dim_qk = 64},
                      DType::bf16, 64, 32);
}

TEST_CASE("flex on the GPU: soft-capping (built-in and lambda) at the fixed reference's edges and past them",
          "[gpu][flex]") {
  check_softcap_bound_edges(Backend::GPU, 64, 64);
  check_softcap_bound_edges(Backend::GPU, 128, 32);
}

TEST_CASE("flex on the GPU: score_mods returning huge finite scores match the float64 softmax", "[gpu][flex]") {
  check_flex_extreme_scores(Backend::GPU, DType::bf16, 64, 64, 130, 300);
  check_flex_extreme_scores(Backend::GPU, DType::f16, 128, 64, 130, 300);
  check_flex_extreme_scores(Backend::GPU, DType::bf16, 128, 32, 77, 513);
  check_flex_frame_switch(Backend::GPU, DType::f16, 64, 64);
  check_flex_frame_switch(Backend::GPU, DType::f16, 128, 32);
  check_flex_frame_switch(Backend::GPU, DType::bf16, 128, 64);
}

TEST_CASE("flex on the GPU: GQA, varlen, head dims", "[gpu][flex]") {
  check_flex_gqa(Backend::GPU, 8, 2, 777, DType::bf16, 64, 64);
  check_flex_gqa(Backend::GPU, 6, 1, 130, DType::f16, 128, 32);
  check_flex_varlen(Backend::GPU, {100, 0, 1, 513, 64}, {100, 0, 1, 513, 64}, false, DType::bf16, 64, 64);
  check_flex_varlen(Backend::GPU, {7, 300, 0, 90}, {200, 17, 5, 0}, true, DType::f16, 64, 64);
  check_flex_varlen(Backend::GPU, {70, 0, 300, 1}, {70, 0, 300, 1}, true, DType::bf16, 64, 64, true);
  for (int d : {32, 64, 96, 128, 192, 256}) check_flex_head_dims(Backend::GPU, d, d, 200, DType::bf16, 64, 64);
  check_flex_head_dims(Backend::GPU, 192, 128, 150, DType::bf16, 64, 32);
}

TEST_CASE("flex on the GPU: a sliding window costs far less than full attention", "[gpu][flex][perf]") {
  attention::FlexShape s{.batch = 1, .heads_q = 16, .seqlen_q = 16384, .seqlen_k = 16384, .head_dim_qk = 128};
  size_t n = size_t(s.heads_q) * s.seqlen_q * s.head_dim_qk;
  Buffer q(n * 2, Backend::GPU), k(n * 2, Backend::GPU), v(n * 2, Backend::GPU), out(n * 2, Backend::GPU),
      lse(size_t(s.heads_q) * s.seqlen_q * 4, Backend::GPU);
  for (Buffer *b : {&q, &k, &v}) b->fill_bytes(0x3c);  // bf16 ≈ 0.0115: finite scores
  auto time = [&](attention::FlexOptions o) {
    o.block_m = 128;
    o.block_n = 64;
    o.num_warps = 8;
    o.backend = Backend::GPU;
    Stream st;
    o.stream = &st;
    attention::flex_forward(q, k, v, out, lse, s, o);  // compile / warm up
    st.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) attention::flex_forward(q, k, v, out, lse, s, o);
    st.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5;
  };
  double full = time({});
  attention::FlexOptions w;
  w.mask = attention::sliding_window(255, 0);
  double window = time(w);
  INFO("full " << full * 1e3 << " ms, causal window 256: " << window * 1e3 << " ms");
  REQUIRE(window * 8 < full);
}
