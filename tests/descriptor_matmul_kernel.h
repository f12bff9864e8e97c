// A bf16 matmul written with tensor descriptors (c = a·b, row-major with leading dimensions lda, ldb, ldc; one
// program per BM×BN tile of c): the same kernel for the CPU codegen test and the GPU test.
#pragma once
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

namespace tilejit::testing {

inline auto &descriptor_matmul_kernel() {
  static auto kernel = Kernel("descriptor_matmul", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<bf16> c, I32 M, I32 N, I32 K,
                                                      I32 lda, I32 ldb, I32 ldc, Constexpr<int> BM, Constexpr<int> BN,
                                                      Constexpr<int> BK) {
    auto a_desc = make_tensor_descriptor(a, {M, K}, {lda, 1}, {BM, BK});
    auto b_desc = make_tensor_descriptor(b, {K, N}, {ldb, 1}, {BK, BN});
    auto m0 = program_id(0) * BM, n0 = program_id(1) * BN;
    auto acc = zeros({BM, BN}, DType::f32);
    for_range(0, K, BK, [&](I32 k0) { acc = dot(a_desc.load({m0, k0}), b_desc.load({k0, n0}), acc); });
    make_tensor_descriptor(c, {M, N}, {ldc, 1}, {BM, BN}).store({m0, n0}, acc.to(DType::bf16));
  });
  return kernel;
}

}  // namespace tilejit::testing
