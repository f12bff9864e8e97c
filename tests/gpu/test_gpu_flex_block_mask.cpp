// The automatic block masks on the GPU (ctest label `gpu`): the same checks as the interpreter's
// (tests/test_flex_block_mask.cpp) on larger shapes and the GPU's tile sizes — lists built only for the
// batches / heads a mask depends on, masks reading no memory reused until what they were built from
// changes, masks reading a captured buffer rebuilt every call.
#include "flex_block_mask_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("flex on the GPU: masks independent of b / h match float64 and build lists only for what they read",
          "[gpu][flex][block_mask]") {
  check_mask_dependence(Backend::GPU, {.batch = 2, .heads_q = 3, .seqlen_q = 333, .seqlen_k = 333, .head_dim_qk = 64},
                        DType::bf16, 64, 64);
  check_mask_dependence(Backend::GPU,
                        {.batch = 3, .heads_q = 4, .heads_kv = 2, .seqlen_q = 200, .seqlen_k = 200, .head_dim_qk = 128},
                        DType::f16, 128, 32);
}

TEST_CASE("flex on the GPU: a block mask of a mask reading no memory is reused until what it was built from changes",
          "[gpu][flex][block_mask]") {
  check_mask_cache(Backend::GPU, DType::bf16, 64, 32);
}

TEST_CASE("flex on the GPU: a mask reading a captured buffer is rebuilt on every call", "[gpu][flex][block_mask]") {
  check_mask_reads_buffer(Backend::GPU, DType::bf16, 64, 64);
}
