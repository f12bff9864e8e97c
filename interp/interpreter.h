// The CPU interpreter: runs a kernel's tile IR for every program id over host memory, with the GPU's
// numerics (values rounded to their dtype after every op: bf16/f16 round-to-nearest-even, f32 arithmetic,
// dot accumulating in f32). It is the tests' oracle and the users' debugger (Backend::Interpreter, or
// TILEJIT_INTERPRET=1).
//
// Semantics where C/LLVM leave a choice (details in the ops_*.cpp file of each op family):
//  - floats are held as double, rounded to their dtype after every op (round-to-nearest-even, straight
//    from the double: interp/numerics.h); transcendentals on f16/bf16 are rounded through f32 first;
//  - integer div/rem by zero throws InterpError; INT_MIN / -1 wraps; shifts by amounts outside [0, bits)
//    give 0 (shl) or the sign fill (shr);
//  - cast float→int truncates toward zero, NaN → 0, out-of-range clamps (like PTX cvt.rzi); to i1: x != 0;
//  - minimum/maximum and reduce max/min propagate NaN; arg_reduce picks the first NaN, else the first extreme;
//  - reduce sum of f16/bf16/f32 accumulates in f32 sequentially along the axis;
//  - dot accumulates a[m,k]·b[k,n] into acc in f32 in increasing k (fmaf for f32 operands; operands rounded
//    to tf32, ties away, when allow_tf32);
//  - masked-off lanes never touch memory; every pointer carries the index of the argument it came from, and
//    is checked against that argument's range only (overrunning x into y is an error); arguments with
//    bytes == 0 accept any address outside the first 4 KiB (they cannot be bounds-checked); a null argument
//    is never accessible; addresses cast from integers are checked against all arguments' ranges.
// Programs run one after another, so atomic_add is trivially atomic and applies lanes in order.
#pragma once
#include <vector>

#include "ir/ir.h"
#include "tilejit/launch.h"

namespace tilejit::interp {

/// Runs `fn` for every program id in `grid` (z outermost, x innermost), sequentially.
/// Pointer arguments are host addresses; every unmasked (or masked-on) access is checked against the
/// range [ptr, ptr + bytes) of the argument its pointer was derived from (arguments with bytes == 0 are not
/// bounds-checked; a null argument is an error whatever the offset) and for alignment to the element size.
/// Throws InterpError naming the op, its source line, the program id and the element index of a fault.
void run(const ir::Function &fn, Grid grid, const std::vector<KernelArg> &args);

}  // namespace tilejit::interp
