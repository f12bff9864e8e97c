// The CPU interpreter: runs a kernel's tile IR for every program id over host memory, with the GPU's
// numerics (values rounded to their dtype after every op: bf16/f16 round-to-nearest-even, f32 arithmetic,
// dot accumulating in f32). It is the tests' oracle and the users' debugger (Backend::Interpreter, or
// TILEJIT_INTERPRET=1).
#pragma once
#include <vector>

#include "ir/ir.h"
#include "tilejit/launch.h"

namespace tilejit::interp {

/// Runs `fn` for every program id in `grid` (z outermost, x innermost), sequentially.
/// Pointer arguments are host addresses; every unmasked (or masked-on) access is checked against the
/// pointer arguments' ranges [ptr, ptr + bytes) (arguments with bytes == 0 are not bounds-checked).
/// Throws InterpError naming the op, its source line, the program id and the element index of a fault.
void run(const ir::Function &fn, Grid grid, const std::vector<KernelArg> &args);

}  // namespace tilejit::interp
