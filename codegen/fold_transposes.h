// Fold transposes: a 2-D transpose read only as the a operand, or only as the b operand, of tensor-core dots is
// not materialized. The dots stage the transpose's source ([K, M] for a, [N, K] for b) as it is and read it
// transposed: b with non-transposing ldmatrix, a with ldmatrix.trans or through an M-major wgmma descriptor (the
// backward's dV += Pᵀ·dO). A transpose with any other user is lowered (through shared memory). The decision is
// part of the LoweringPlan and printed in the plan's text ("folded" after the value's layout).
#pragma once
#include "codegen/lowering_plan.h"
#include "ir/ir.h"

namespace tilejit::codegen {

/// Adds to plan.folded every [1, 0] transpose of a rank-2 tile of fn whose every use is operand a, or every use
/// operand b, of a dot that runs on tensor cores (dot_uses_mma for num_warps).
void fold_transposes(const ir::Function &fn, int num_warps, LoweringPlan &plan);

}  // namespace tilejit::codegen
