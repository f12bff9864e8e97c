// What a mask function's value depends on, read from its own traced and optimized IR: the function is traced
// alone into a probe kernel whose every input (b, h, the positions, the lengths) is an opaque runtime
// parameter with no specialization (not divisible by 16), and its result is stored. After ir::optimize, a
// parameter with no use left is one the mask's value cannot depend on, for any value of the others: the
// probe assumes nothing the real kernels might not, so what it drops they could drop too. The block-mask
// build uses this to build one set of lists for all batches / heads, and to cache masks that read no memory.
#include <fmt/format.h>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {
namespace {

// Runtime parameters first, in this order: their body arguments have the same indices.
enum ProbeParam : int { pOut, pCuQ, pCuK, pB, pH, pQ0, pK0, pSeqlenQ, pSeqlenK, pVarlen, kNumProbeParams };
constexpr int kNumProbeRuntimeParams = pVarlen;  // the body arguments before the captures
constexpr int kProbeRows = 16;

ParamTable probe_params() {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"OUT", "CU_SEQLENS_Q", "CU_SEQLENS_K"}) t.add(n, K::Ptr, DType::i32);
  // Not specialized: the probe must assume nothing about these values (see the top of this file).
  for (const char *n : {"b", "h", "q0", "k0", "seqlen_q", "seqlen_k"}) t.add(n, K::I32, DType::i32, false);
  t.add("VARLEN", K::ConstBool, DType::i1);
  return t;
}

/// Traces mask(b, h, q_idx, kv_idx) as the block-mask and attention kernels do (same ModScope: lengths and
/// token offsets per sequence), every input a parameter, and stores the result.
void trace_probe(const MaskFn &fn, std::span<const detail::ArgValue> a,
                 std::vector<std::shared_ptr<detail::CaptureState>> &captures) {
  auto P = [](int i) { return detail::param_tile(i); };
  const bool varlen = a[pVarlen].i != 0;
  Tile b = P(pB), h = P(pH);
  Sequence sq = sequence(varlen, b, P(pSeqlenQ), P(pSeqlenK), P(pCuQ), P(pCuK));
  ModScope scope(sq.seqlen_q, sq.seqlen_k, sq.q_start, sq.k_start);
  Tile r = arange(0, kProbeRows);
  Tile q_idx = (P(pQ0) + r)(_, None), kv_idx = (P(pK0) + r)(None, _);
  Mask mask(fn);
  Tile vis = visible(mask, false, {}, b, h, q_idx, kv_idx);
  Tile offs = r(_, None) * kProbeRows + r(None, _);
  store(P(pOut) + offs, vis.to(DType::i32) + zeros({kProbeRows, kProbeRows}, DType::i32));
  for (const auto &c : dsl::TraceContext::current()->captures) captures.push_back(c.state);
}

MaskAnalysis analyze(const MaskFn &fn, bool varlen) {
  ParamTable t = probe_params();
  std::vector<std::shared_ptr<detail::CaptureState>> traced;
  KernelBase probe("flex_mask_probe", std::move(t.decls), std::move(t.names),
                   [&](std::span<const detail::ArgValue> a) { trace_probe(fn, a, traced); });
  std::vector<detail::ArgValue> args(kNumProbeParams);
  const DevicePtr fake{256, 0};
  for (int i : {pOut, pCuQ, pCuK}) args[size_t(i)] = ptr_arg(fake);
  // 17: not divisible by 16 either, should a parameter be specialized after all.
  for (int i : {pB, pH, pQ0, pK0, pSeqlenQ, pSeqlenK}) args[size_t(i)] = int_arg(17);
  args[pVarlen] = int_arg(varlen);
  const ir::Function &f = probe.function(args);

  MaskAnalysis r;
  r.fn = fn;
  const auto uses = ir::use_counts(*f.body);
  auto used = [&](int body_arg) { return uses.count(f.param(body_arg)) != 0; };
  r.reads_b = used(pB);
  r.reads_h = used(pH);
  ir::walk(*f.body, [&](ir::Op &op) {
    if (ir::reads_memory(op.kind)) r.reads_memory = true;
  });
  // Captures follow the declared parameters, in the order the trace met them.
  for (size_t i = 0; i < traced.size(); ++i)
    if (used(kNumProbeRuntimeParams + int(i))) r.captures.push_back(traced[i]);
  return r;
}

}  // namespace

std::shared_ptr<const MaskAnalysis> analyze_mask(const MaskFn &fn, bool varlen) {
  static KernelLru<std::pair<const void *, bool>, const MaskAnalysis> cache(kMaxCachedModKernels);
  return cache.get({fn.identity(), varlen}, [&] { return std::make_shared<const MaskAnalysis>(analyze(fn, varlen)); });
}

}  // namespace tilejit::attention::flex
