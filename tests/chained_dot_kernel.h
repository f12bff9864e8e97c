// A DSL kernel shaped like the flex kernel's ALiBi through the tensor cores: in a key loop, s = q·kᵀ + af·bf,
// the [BM, 16]·[16, BN] product of loop-invariant operands issued first and the q·k wgmmas continuing its
// accumulators (a chained dot, lower_dot_mma), its result read later (a deferred wgmma wait). The first loop
// sits inside if_(flag): its operands staged there must be staged again for the second loop when the
// flag is 0 (codegen/stage_operands.h). Also two kernels whose loop-invariant operand is read by a
// wgmma dot and by one that cannot use wgmma. Used by the PTX checks and the GPU tests.
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

/// A [64, 16] loop-invariant, read by a wgmma dot (B [16, 64] per iteration) and by one that cannot use wgmma
/// (B [16, 32]): O = Σ_j A·B_j, O2 = Σ_j A·B2_j over n iterations (B_j at j·1024, B2_j at j·512 elements).
inline auto shared_a_kernel() {
  return Kernel("shared_a", [](Ptr<bf16> A, Ptr<bf16> B, Ptr<bf16> B2, Ptr<f32> O, Ptr<f32> O2, I32 n) {
    Tile r = arange(0, 64), k = arange(0, 16), c = arange(0, 64), c32 = arange(0, 32);
    Tile a = load(A + r(_, None) * 16 + k(None, _));
    Tile acc = zeros({64, 64}, DType::f32), acc2 = zeros({64, 32}, DType::f32);
    for_range(0, n, 1, [&](I32 j) {
      acc = dot(a, load(B + j * 1024 + k(_, None) * 64 + c(None, _)), acc);
      acc2 = dot(a, load(B2 + j * 512 + k(_, None) * 32 + c32(None, _)), acc2);
    });
    store(O + r(_, None) * 64 + c(None, _), acc);
    store(O2 + r(_, None) * 32 + c32(None, _), acc2);
  });
}

/// B [64, 64] loop-invariant, read by a 16-row dot (no wgmma) and a 64-row one: O = Σ_j A_j·B,
/// O2 = Σ_j A2_j·B (A_j [64, 64] at j·4096, A2_j [16, 64] at j·1024 elements).
inline auto shared_b_kernel() {
  return Kernel("shared_b", [](Ptr<bf16> A, Ptr<bf16> A2, Ptr<bf16> B, Ptr<f32> O, Ptr<f32> O2, I32 n) {
    Tile r = arange(0, 64), r16 = arange(0, 16), c = arange(0, 64);
    Tile b = load(B + r(_, None) * 64 + c(None, _));
    Tile acc = zeros({64, 64}, DType::f32), acc2 = zeros({16, 64}, DType::f32);
    for_range(0, n, 1, [&](I32 j) {
      acc2 = dot(load(A2 + j * 1024 + r16(_, None) * 64 + c(None, _)), b, acc2);
      acc = dot(load(A + j * 4096 + r(_, None) * 64 + c(None, _)), b, acc);
    });
    store(O + r(_, None) * 64 + c(None, _), acc);
    store(O2 + r16(_, None) * 64 + c(None, _), acc2);
  });
}

}  // namespace tilejit::testing
