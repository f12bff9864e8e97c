// Verifier, printer and optimization passes over the tile IR. One pass per file (ir/passes/*.cpp).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace tilejit::ir {

/// Checks structural and type invariants (operand counts, shapes, dtypes, dominance, terminators).
/// Throws VerifyError with the offending op printed and its source location.
void verify(const Function &fn);
/// Stable textual form (value names %0, %1, ... assigned in program order; params by name).
std::string print(const Function &fn);
/// print(fn) with each op's source location appended (" loc(file:line:column)"); for debugging only, since
/// print(fn) is the compile-cache key and must not depend on where the user wrote the kernel.
std::string print_with_locations(const Function &fn);
/// What print_annotated adds to a value's type: text inside its brackets ("tensor<64xf32, TEXT>"), or "" for none.
using TypeAnnotator = std::function<std::string(const Value *)>;
/// What print_annotated appends to an op's line as a comment ("  // TEXT"), or "" for none.
using OpAnnotator = std::function<std::string(const Op *)>;
/// print(fn) with each tile result's type annotated, and comments after ops (codegen prints its layouts and
/// decisions this way).
std::string print_annotated(const Function &fn, const TypeAnnotator &annotate, const OpAnnotator &comment = {});

void fold_constants(Function &fn);   // evaluates ops whose operands are all constants
void canonicalize(Function &fn);     // algebraic identities (x+0, x*1, broadcast of splat, ...)
void cse(Function &fn);              // common-subexpression elimination of pure ops
void dce(Function &fn);              // removes unused pure ops and unused loop-carried values
/// Moves loads whose operands do not change across a for loop's iterations (and the pure ops computing
/// them) in front of the loop, when the loop writes no memory; the moved load's mask gains `lb < ub`.
void hoist_invariant_loads(Function &fn);
/// An f32 division (not div_rn's) by a constant or by a divisor broadcast from fewer elements (a scalar, a row's
/// or a column's value) becomes a multiplication by the reciprocal, computed once per divisor element where the divisor is
/// defined: a relative error of at most 2^-23 + 2^-48 where 1/b is normal (see
/// ir/passes/reciprocal_division.cpp for the rest).
void reciprocal_division(Function &fn);
/// An f32 tile multiplied by two uniform factors (constants or broadcast scalars) one after the other, or by one
/// and then as an fma's multiplicand by another, is multiplied once by their product: (x·a)·b → x·(a·b),
/// fma(x·a, b, c) → fma(x, a·b, c), where x·a has no other use. Within about 2 ulp where a·b is a normal f32 (see
/// ir/passes/reassociate_scalar_factors.cpp for the rest).
void reassociate_scalar_factors(Function &fn);
/// An integer tile converted to f32 is converted before the arithmetic that makes it a full tile, where exact:
/// f32(|x|) → |f32(x)| (x never INT_MIN), f32(a ± b) → f32(a) ± f32(b) for a, b constants or replicated from fewer
/// elements within ±2^24 (ir/value_range.h). Bit for bit the same results.
void convert_before_broadcast(Function &fn);
/// An f32 product whose only use is an addition or subtraction becomes an fma: a·b + c → fma(a, b, c),
/// c − a·b → fma(−a, b, c), a·b − c → fma(a, b, −c) (a replicated operand negated before its replication). The
/// product is no longer rounded on its own (see ir/passes/contract_fma.cpp).
void contract_fma(Function &fn);
/// Which float rewrites optimize may make. Exact: only those that keep every result's bits (folding,
/// canonicalization, hoisting, CSE, DCE). Fast (what kernels get): also reciprocal_division,
/// reassociate_scalar_factors and contract_fma, each within the error its header states.
enum class FloatRewrites { Exact, Fast };
/// Called by optimize with the name of each stage and the function as it stands after it.
using StageObserver = std::function<void(const char *stage, const Function &fn)>;
/// The standard pipeline: verify, fold, canonicalize, convert_before_broadcast, reciprocal_division and
/// reassociate_scalar_factors (Fast), hoist_invariant_loads, cse, contract_fma (Fast), dce (to a fixed point),
/// verify. `observe` sees "traced" (the input), each pass by its name after the first round's run of it (the
/// float rewrites only with Fast), then "optimized" (the fixed point).
void optimize(Function &fn, FloatRewrites rewrites = FloatRewrites::Fast, const StageObserver &observe = {});
/// The stages optimize reports, in order: "traced", every pass of the pipeline, "optimized".
const std::vector<std::string> &pipeline_stages();

}  // namespace tilejit::ir
