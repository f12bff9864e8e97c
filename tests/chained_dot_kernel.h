// A DSL kernel shaped like the flex kernel's ALiBi through the tensor cores: in a key loop, s = q·kᵀ + af·bf,
// the [BM, 16]·[16, BN] product of loop-invariant operands issued first and the q·k wgmmas continuing its
// accumulators (a chained dot, lower_dot_mma), its result read later (a deferred wgmma wait). The first loop
// sits inside if_(flag): its operands staged there must be staged again for the second loop when the
// flag is 0 (Lowering::forget_staged_since). Used by the PTX checks and the GPU test.
#pragma once
#include "tilejit/tilejit.h"

namespace tilejit::testing {

/// Q [M, D], K [nblocks·BN, D], AF [M, 16], BF [16, BN] (bf16, row-major); SUM and MAX [M, BN] f32, with
/// s_j = Q·K_jᵀ + AF·BF over key block j: SUM = Σ_j s_j when flag ≠ 0 (else 0), MAX = max_j s_j.
/// One program per BM rows.
inline auto chained_dot_kernel() {
  return Kernel("chained_dot", [](Ptr<bf16> Q, Ptr<bf16> Kp, Ptr<bf16> AF, Ptr<bf16> BF, Ptr<f32> SUM, Ptr<f32> MAX,
                                  I32 flag, I32 nblocks, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> D) {
    Tile rows = program_id(0) * int(BM) + arange(0, BM);
    Tile dcol = arange(0, D), fcol = arange(0, 16), ncol = arange(0, BN);
    Tile q = load(Q + rows(_, None) * int(D) + dcol(None, _));
    Tile af = load(AF + rows(_, None) * 16 + fcol(None, _));
    Tile bf = load(BF + fcol(_, None) * int(BN) + ncol(None, _));
    Tile sum = zeros({BM, BN}, DType::f32), mx = full({BM, BN}, -1e30, DType::f32);
    auto s_of = [&](const Tile &j) {
      Tile keys = j * int(BN) + ncol;
      Tile k = load(Kp + keys(_, None) * int(D) + dcol(None, _));
      return dot(q, trans(k), dot(af, bf));
    };
    if_(flag != 0, [&] { for_range(0, nblocks, 1, [&](I32 j) { sum = sum + s_of(j); }); });
    for_range(0, nblocks, 1, [&](I32 j) { mx = maximum(mx, s_of(j)); });
    Tile offs = rows(_, None) * int(BN) + ncol(None, _);
    store(SUM + offs, sum);
    store(MAX + offs, mx);
  });
}

}  // namespace tilejit::testing
