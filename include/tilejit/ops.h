// Tile operations of the kernel DSL. Each one records an IR op (with the caller's source line) into the
// kernel being traced, and checks its inputs first: a violation throws TraceError with a sentence naming
// the op, the shapes/dtypes involved and the user's "file:line", e.g.
//   "dot: inner dimensions differ: a is 64x32 (bf16), b is 64x64 (bf16) at kernels/foo.cpp:42".
//
// Shapes: every tile dim is a power of two (arange, full, zeros, reshape, broadcast_to results checked).
// Binary/ternary ops broadcast numpy-style (aligned from the right; size-1 and missing leading dims stretch;
// scalars splat) and promote dtypes as Triton: both float → the wider (bf16 with f16 → f32); int with float
// → the float; two ints → the wider (i1 with an int → the int). Literals are weak (see tile.h).
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <source_location>
#include <type_traits>
#include <vector>

#include "tilejit/tensor_descriptor.h"
#include "tilejit/tile.h"
#include "tilejit/types.h"

namespace tilejit {

using SrcLoc = std::source_location;

// ---- sources ----
/// Index of this program along `axis` (0..2): i32 scalar.
Tile program_id(int axis, SrcLoc loc = SrcLoc::current());
/// Number of programs along `axis` (0..2): i32 scalar.
Tile num_programs(int axis, SrcLoc loc = SrcLoc::current());
/// [start, start+1, ..., end-1]: i32 [end-start]; end-start must be a power of two, values must fit i32.
Tile arange(int64_t start, int64_t end, SrcLoc loc = SrcLoc::current());
/// A tile of `shape` (empty = scalar) filled with `value` converted to `dtype` (ints truncate).
Tile full(std::vector<int64_t> shape, double value, DType dtype, SrcLoc loc = SrcLoc::current());
Tile zeros(std::vector<int64_t> shape, DType dtype, SrcLoc loc = SrcLoc::current());
/// Same shape and dtype as t (t must not be a pointer tile).
Tile zeros_like(const Tile &t, SrcLoc loc = SrcLoc::current());
Tile full_like(const Tile &t, double value, SrcLoc loc = SrcLoc::current());

// ---- shape manipulation ----
/// Same elements (row-major) in a new shape; element counts must match; dims powers of two.
Tile reshape(const Tile &t, std::vector<int64_t> shape, SrcLoc loc = SrcLoc::current());
/// 2-D transpose.
Tile trans(const Tile &t, SrcLoc loc = SrcLoc::current());
/// General permutation: result dim i = source dim perm[i].
Tile trans(const Tile &t, std::vector<int64_t> perm, SrcLoc loc = SrcLoc::current());
/// Inserts a dim of size 1 at `axis` (0..rank; negative counts from the end, -1 = append).
Tile expand_dims(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());
/// Broadcasts (numpy rules) to `shape`.
Tile broadcast_to(const Tile &t, std::vector<int64_t> shape, SrcLoc loc = SrcLoc::current());

// ---- elementwise ----
/// a where cond else b; cond must be i1 (a bool literal is accepted). a, b promoted; all broadcast.
Tile where(const Tile &cond, const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());
Tile minimum(const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());
Tile maximum(const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());
/// Float math; int tiles are cast to f32 first. Result dtype = (float) operand dtype. On the GPU, f32 (and
/// f16/bf16, computed in f32) exp, exp2, log, log2, rsqrt, tanh and sigmoid use the PTX approximations
/// (PTX ISA 9.7.3: ex2/lg2.approx.ftz, rsqrt.approx, tanh.approx): exp2's relative error is about 2^-22,
/// tanh's about 2^-11; exp/exp2 results below 2^-126 and subnormal log/log2 inputs flush to 0. f64 math
/// uses the f64 forms. The interpreter computes them in float64.
Tile exp(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile exp2(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile log(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile log2(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile sqrt(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile rsqrt(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile tanh(const Tile &x, SrcLoc loc = SrcLoc::current());
Tile sigmoid(const Tile &x, SrcLoc loc = SrcLoc::current());
/// |x| for ints (kept int) and floats.
Tile abs(const Tile &x, SrcLoc loc = SrcLoc::current());
/// a*b+c (floats; ints cast to f32); operands promoted and broadcast.
Tile fma(const Tile &a, const Tile &b, const Tile &c, SrcLoc loc = SrcLoc::current());
/// Converts to `dtype` (float→int truncates toward zero). Pointer tiles cannot be cast.
Tile cast(const Tile &t, DType dtype, SrcLoc loc = SrcLoc::current());
/// Converts an i32 tile of positions (arange, program_id, loop indices and runtime scalars combined by + and −,
/// e.g. a distance q_idx − kv_idx) to f32. The GPU lowering splits each element into a part shared by all of a
/// thread's elements and a compile-time constant, and computes f32(shared part) + constant: one add per
/// distinct constant instead of an integer add and a conversion per element (codegen/lower_index_to_f32.cpp).
/// Exact, and equal to cast(), while the shared part and the values stay below 2^24 in magnitude; beyond that
/// an element may differ from the correctly rounded conversion by up to two ulps, and where the i32 sum wraps
/// around (cast() converts the wrapped value) the result is unspecified. Tiles of other forms, and the
/// interpreter, convert exactly as cast() does. Throws TraceError for a non-i32 or pointer tile or a literal
/// that is not an i32.
Tile index_to_f32(const Tile &t, SrcLoc loc = SrcLoc::current());
/// index_to_f32(index)·a + c, for an i32 tile `index` of positions (as index_to_f32) and float `a`, `c`
/// (broadcast; the result is f32 of the broadcast shape). The GPU lowering may round it as
/// (c + a·C_r) + a·f32(index − C_r), where C_r is the compile-time constant of index_to_f32's split, and keeps
/// the two parts apart for the result's consumers: a max or min along an axis whose elements share the second
/// part within a thread adds it once per result (monotone rounding: exactly the max of the sums), an fma
/// taking the result as a factor folds it into its addend, and a `where` with −inf on the other side passes
/// it through. Why: a bias linear in positions (ALiBi's −slope·(q_idx − kv_idx) where its sign is known)
/// then costs one fma with an immediate per score. Rounding: besides the fma's one rounding, up to three
/// more, each of at most half an ulp of the largest of |c + a·C_r|, |a·f32(index − C_r)| and the result;
/// the interpreter computes the plain fma of index_to_f32(index). The parts are separate IEEE values: with
/// an infinite `a`, or |a·C_r| or |a·f32(index − C_r)| past FLT_MAX (with |a| ≤ 2^100 and positions within
/// ±2^24 they are not), the GPU may give NaN (inf − inf) where the fma gives ±inf; a consumer's infinite
/// factor likewise. Throws TraceError where index_to_f32 or fma would, or when `a` or `c` is not a float.
Tile fma_index(const Tile &index, const Tile &a, const Tile &c, SrcLoc loc = SrcLoc::current());
/// a / b correctly rounded (IEEE division) for float tiles, broadcast and promoted as `/`, which may instead
/// multiply by a reciprocal where b is broadcast from fewer elements (tile.h; 2 ulp). Use it where the last
/// bit matters: floor() or an integer cast of a quotient that should be exact. Throws TraceError for
/// non-float operands.
Tile div_rn(const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());
/// a · b rounded on its own for float tiles, broadcast and promoted as `*`, which the compiler may instead fuse
/// with a following addition into one fma (ir contract_fma: the sum is then taken from the exact product). Use it
/// where a product must equal the same product computed elsewhere, bit for bit (x·c − R with R = x·c rounded
/// must give 0). Throws TraceError for non-float operands.
Tile mul_rn(const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());
/// Ceiling division of int tiles: (a + b - 1) / b.
Tile cdiv(const Tile &a, const Tile &b, SrcLoc loc = SrcLoc::current());

/// Host-side ceiling division of plain integers (also Constexpr<int>), usable for grid sizes.
template <class T>
struct host_integer_of { using type = T; };
template <class T>
struct host_integer_of<Constexpr<T>> { using type = T; };
template <class T>
concept HostInteger = std::integral<typename host_integer_of<std::remove_cvref_t<T>>::type>;
template <HostInteger A, HostInteger B>
constexpr auto cdiv(A a, B b) {
  using R = std::common_type_t<typename host_integer_of<A>::type, typename host_integer_of<B>::type>;
  return R((R(a) + R(b) - 1) / R(b));
}

// ---- memory ----
/// Loads the pointer tile `ptr` (shape S) → values of the pointee dtype, shape S (ptr, mask and other are
/// broadcast together). `mask` (i1) disables lanes, which read `other` (0 when absent; only with a mask).
/// `other` must have the pointee dtype or be a literal.
Tile load(const Tile &ptr, const Tile &mask = {}, const Tile &other = {}, SrcLoc loc = SrcLoc::current());
/// Stores `value` (pointee dtype, or a literal; broadcast to ptr's shape) where mask is on (all lanes when
/// absent). A value of another dtype is an error: cast it explicitly.
void store(const Tile &ptr, const Tile &value, const Tile &mask = {}, SrcLoc loc = SrcLoc::current());
/// The memory ordering of an atomic at device scope (not system scope: the host does not take part). Semantics
/// from the PTX ISA's "Memory Consistency Model" chapter (release and acquire patterns, fence cumulativity).
enum class MemOrder {
  /// Orders nothing but the atomic itself (e.g. summing gradients).
  Relaxed,
  /// Release and acquire for the whole program: every memory access the program made before the atomic (by
  /// any of its threads) is visible to a program that later observes the atomic's result with AcqRel, and
  /// every access after it sees what such programs made visible before their own AcqRel atomic. This is what
  /// "the last program to arrive combines the others' results" needs (an arrival counter). Branch on the
  /// returned value (the same in every thread of the program), not on a scalar load of memory other programs
  /// change (each thread loads it on its own and may see another value). Never wait for another program to
  /// arrive: programs are not guaranteed to be resident together (the interpreter runs them one by one).
  /// Costs a barrier before and after, and a fence (membar.gl) in the threads that perform the atomic; a loop
  /// holding one is not software-pipelined.
  AcqRel,
};
/// Atomically adds `value` at ptr (device scope, ordered by `order`) where mask is on; returns the old values
/// (0 in masked-off lanes). On a scalar pointer one thread of the program performs it and every thread gets
/// the old value. Throws TraceError naming the op and the user's line when value is not of the pointee's dtype
/// (a literal takes it) or mask is not i1; CompileError at lowering for a pointee of i1, i8, i16 or pointer.
Tile atomic_add(const Tile &ptr, const Tile &value, const Tile &mask = {}, MemOrder order = MemOrder::Relaxed,
                SrcLoc loc = SrcLoc::current());

// ---- reductions (axis may be negative; the result drops that axis) ----
/// Sum along axis; ints narrower than i32 are summed as i32; floats keep their dtype.
Tile sum(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());
Tile max(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());
Tile min(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());
/// i32 index of the first maximum / minimum along axis.
Tile argmax(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());
Tile argmin(const Tile &t, int axis, SrcLoc loc = SrcLoc::current());

// ---- matrix product ----
/// a [M,K] · b [K,N] + acc → f32 [M,N]. a and b: same dtype, one of f16/bf16/f32; M, N, K ≥ 16;
/// acc: f32 [M,N] (zeros when absent). allow_tf32 lets f32 inputs use TF32 tensor cores.
/// On sm_90a f16/bf16 dots run as asynchronous wgmma (PTX ISA 9.7.15) where the shapes allow: the wait for the
/// result is placed at its first use, so independent work in between overlaps it; and inside a loop, a dot
/// whose acc is another such dot's result read nowhere else, whose A is loop-invariant and whose wgmma
/// instructions have that dot's shape continues its accumulation without waiting (e.g.
/// dot(q, trans(k), dot(bias_a, bias_b)) with q and bias_a defined before the loop: one tensor-core chain).
Tile dot(const Tile &a, const Tile &b, const Tile &acc = {}, bool allow_tf32 = false,
         SrcLoc loc = SrcLoc::current());

// ---- control flow ----
/// for (iv = start; iv < end; iv += step) body(iv). Bounds are int scalars (tiles or literals): i32, or i64
/// if any bound is i64. Handles that existed before the loop and are reassigned in the body become
/// loop-carried values; after the call they hold the loop's results. A reassigned handle must keep its
/// type (shape and dtype). A handle holding a C++ literal cannot be carried: initialise it with full().
void for_range(const Tile &start, const Tile &end, const Tile &step, const std::function<void(I32)> &body,
               SrcLoc loc = SrcLoc::current());
/// if (cond) then_fn() else else_fn(); cond is an i1 scalar. Handles reassigned in either branch get the
/// branch's value afterwards (the other branch keeps the outer value); both must have the same type.
void if_(const Tile &cond, const std::function<void()> &then_fn, const std::function<void()> &else_fn = {},
         SrcLoc loc = SrcLoc::current());

}  // namespace tilejit
