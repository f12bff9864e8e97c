// Attention forward in the DSL: FlashAttention-2's loop order (arXiv 2307.08691, Algorithm 1).
//
// Program (start_m, batch·head) owns query rows [start_m·BLOCK_M, +BLOCK_M). It keeps the running row max,
// the running row sum l_i and the unnormalized output acc in f32, streams K/V in blocks of BLOCK_N, and
// normalizes once after the loop. The softmax works in log2 units: exp2(s·scale·log2(e) − R), one fma per
// score (kernels/online_softmax.h). One loop visits the key blocks; only blocks on the diagonal (causal) or
// past the sequence's end take the masked branch. With causal masking the loop stops at the diagonal block, so
// key blocks above it are never loaded, and programs run longest-first (the last query blocks see the most
// keys).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "kernels/attention_internal.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"
#include "kernels/launch_options.h"
#include "kernels/online_softmax.h"
#include "kernels/strided_extent.h"
#include "tilejit/attention.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"
#include "kernels/log2_units.h"

namespace tilejit::attention {
namespace {

using kernels::kLog2e;
using kernels::kLn2;

template <class T>
auto &attention_kernel() {
  static auto kernel = Kernel(
      "attention_fwd",
      [](Ptr<T> Q, Ptr<T> K, Ptr<T> V, Ptr<T> O, Ptr<f32> LSE, F32 qk_scale_log2, I32 heads, I32 seqlen_q,
         I32 seqlen_k, I32 stride_qb, I32 stride_qh, I32 stride_qs, I32 stride_kb, I32 stride_kh, I32 stride_ks,
         I32 stride_vb, I32 stride_vh, I32 stride_vs, I32 stride_ob, I32 stride_oh, I32 stride_os,
         Constexpr<int> BLOCK_M, Constexpr<int> BLOCK_N, Constexpr<int> HEAD_DIM, Constexpr<bool> CAUSAL) {
        const float neg_inf = -std::numeric_limits<float>::infinity();
        // Causal: the last query blocks do the most work; starting them first shortens the tail of the grid.
        auto start_m = CAUSAL ? num_programs(0) - 1 - program_id(0) : program_id(0);
        auto bh = program_id(1);
        auto b = bh / heads;
        auto h = bh % heads;

        auto offs_m = start_m * BLOCK_M + arange(0, BLOCK_M);
        auto offs_n = arange(0, BLOCK_N);
        auto offs_d = arange(0, HEAD_DIM);
        auto row_ok = offs_m < seqlen_q;

        auto q_ptrs = Q + (b * stride_qb + h * stride_qh) + offs_m(_, None) * stride_qs + offs_d(None, _);
        auto q = load(q_ptrs, row_ok(_, None), 0.f);  // [BLOCK_M, HEAD_DIM], stays in registers
        auto k_base = K + (b * stride_kb + h * stride_kh);
        auto v_base = V + (b * stride_vb + h * stride_vh);

        // The scale is folded into the softmax's one fma per score (as FlashAttention-2 does); the row max is
        // taken on raw scores: max(s)·scale = max(s·scale) because scale > 0 (check_shape).
        OnlineSoftmax softmax(BLOCK_M, qk_scale_log2, qk_scale_log2 * kLn2, T::dtype,
                              OnlineSoftmax::Range::Bounded);
        auto l_i = zeros({BLOCK_M}, DType::f32);
        auto acc = zeros({BLOCK_M, HEAD_DIM}, DType::f32);

        // Key blocks [0, full_end) are visible to every row of this program (inside the sequence and, when
        // causal, wholly at or below the diagonal): they skip the mask. [full_end, end_n) are masked; with
        // causal masking the loop stops at the diagonal, so blocks above it are never loaded. One loop with a
        // branch rather than two loops: the software pipeline then prefetches the masked blocks too (a second
        // loop would start with an exposed load; measured 3-12% at seqlen 1024-2048 on the H200).
        auto m0 = start_m * BLOCK_M;
        Tile end_n = seqlen_k;
        Tile full_end = (seqlen_k / BLOCK_N) * BLOCK_N;
        if (CAUSAL) {
          end_n = minimum(seqlen_k, m0 + BLOCK_M);
          full_end = (minimum(seqlen_k, m0 + 1) / BLOCK_N) * BLOCK_N;
        }

        // One key block.
        auto block = [&](const Tile &start_n) {
          auto cols = start_n + offs_n;
          auto col_ok = cols < seqlen_k;
          // K is read as stored, [BLOCK_N, HEAD_DIM] (contiguous rows, vector loads); the tensor-core dot
          // reads trans(k) straight from its shared-memory staging, no separate transpose.
          auto k = load(k_base + cols(_, None) * stride_ks + offs_d(None, _), col_ok(_, None), 0.f);
          auto s = dot(q, trans(k));  // [BLOCK_M, BLOCK_N] f32
          auto apply_mask = [&] {
            if (CAUSAL)
              s = where(col_ok(None, _) & (offs_m(_, None) >= cols(None, _)), s, neg_inf);
            else
              s = where(col_ok(None, _), s, neg_inf);
          };
          if_(start_n >= full_end, apply_mask);
          auto [p, alpha] = softmax.step(s);
          l_i = l_i * alpha + sum(p, 1);

          auto v = load(v_base + cols(_, None) * stride_vs + offs_d(None, _), col_ok(_, None), 0.f);
          acc = dot(p.to(T::dtype), v, acc * alpha(_, None));
        };
        for_range(0, end_n, BLOCK_N, [&](I32 start_n) { block(start_n); });

        // Rows that saw no key (l = 0) get output 0 and logsumexp -inf.
        auto l_safe = where(l_i == 0.f, 1.f, l_i);
        // One division per row, then multiplies: a divide per element costs ptxas's IEEE sequence with a slow path.
        auto out = acc * (1.f / l_safe)(_, None);
        auto o_ptrs = O + (b * stride_ob + h * stride_oh) + offs_m(_, None) * stride_os + offs_d(None, _);
        store(o_ptrs, out.to(T::dtype), row_ok(_, None));
        store(LSE + bh * seqlen_q + offs_m, softmax.lse(l_i), row_ok);
      },
      {"Q", "K", "V", "O", "LSE", "qk_scale_log2", "heads", "seqlen_q", "seqlen_k", "stride_qb", "stride_qh",
       "stride_qs", "stride_kb", "stride_kh", "stride_ks", "stride_vb", "stride_vh", "stride_vs", "stride_ob",
       "stride_oh", "stride_os", "BLOCK_M", "BLOCK_N", "HEAD_DIM", "CAUSAL"});
  return kernel;
}

}  // namespace

void check_shape(const Shape &s, const Options &opt) {
  if (!std::isfinite(opt.softmax_scale) || opt.softmax_scale < 0)
    throw TraceError(fmt::format("attention::forward: softmax_scale {} must be finite and positive (0 selects "
                                 "1/sqrt(head_dim))", opt.softmax_scale));
  // The kernel takes scores to log2 units with the factor scale·log2(e) (f32), which must be finite.
  if (!std::isfinite(opt.softmax_scale * kLog2e))
    throw TraceError(fmt::format("attention::forward: softmax_scale {:g} is too large: scale·log2(e) overflows f32 "
                                 "(at most {:g})", opt.softmax_scale,
                                 std::numeric_limits<float>::max() / double(kLog2e)));
  if (opt.block_m > 256 || opt.block_n > 256)
    throw TraceError(fmt::format("attention::forward: BLOCK_M {} / BLOCK_N {} too large (at most 256)", opt.block_m,
                                 opt.block_n));
  if (s.batch < 0 || s.heads < 0 || s.seqlen_q < 0 || s.seqlen_k < 0)
    throw TraceError(fmt::format("attention::forward: sizes must be non-negative (batch {}, heads {}, seqlen_q {}, "
                                 "seqlen_k {})", s.batch, s.heads, s.seqlen_q, s.seqlen_k));
  if (!kernels::pow2_at_least(s.head_dim, 16) || s.head_dim > 256)
    throw TraceError("attention::forward: head_dim " + std::to_string(s.head_dim) +
                     " is not supported (a power of two in [16, 256])");
  if (!kernels::pow2_at_least(opt.block_m, 16) || !kernels::pow2_at_least(opt.block_n, 16))
    throw TraceError(fmt::format("attention::forward: BLOCK_M {} and BLOCK_N {} must be powers of two ≥ 16",
                                 opt.block_m, opt.block_n));
  if (!kernels::pow2_at_least(opt.num_warps, 1) || opt.num_warps > 16)
    throw TraceError(fmt::format("attention::forward: num_warps {} must be a power of two in [1, 16]", opt.num_warps));
  if (opt.num_stages < 1 || opt.num_stages > 8)
    throw TraceError(fmt::format("attention::forward: num_stages {} must be in [1, 8]", opt.num_stages));
  if (opt.causal && s.seqlen_q != s.seqlen_k)
    throw TraceError("attention::forward: causal masking needs seqlen_q == seqlen_k (got " +
                     std::to_string(s.seqlen_q) + " and " + std::to_string(s.seqlen_k) + ")");
  if (opt.dtype != DType::bf16 && opt.dtype != DType::f16)
    throw TraceError("attention::forward: dtype must be bf16 or f16");
  int64_t heads_total = int64_t(s.batch) * s.heads;
  if (heads_total > 65535)
    throw TraceError("attention::forward: batch·heads = " + std::to_string(heads_total) +
                     " exceeds the grid's y limit 65535");
}

namespace {

LaunchConfig launch_config(const Options &opt) { return kernels::launch_config_of(opt); }

// Calls f(kernel, args...) with the kernel for opt.dtype and the full argument list.
template <class F, class PQ, class PO, class PL>
decltype(auto) with_args(const Shape &s, const Options &opt, const detail::Layout &L, const PQ &q, const PQ &k,
                         const PQ &v, PO &out, PL &lse, F &&f) {
  float scale = opt.softmax_scale != 0 ? opt.softmax_scale : 1.f / std::sqrt(float(s.head_dim));
  int D = s.head_dim;
  auto i32 = [](int64_t x) { return int(x); };  // range-checked by check_strides
  auto call = [&](auto &kernel) -> decltype(auto) {
    return f(kernel, q, k, v, out, lse, scale * kLog2e, s.heads, s.seqlen_q, s.seqlen_k, i32(L.q.batch),
             i32(L.q.head), i32(L.q.seq), i32(L.k.batch), i32(L.k.head), i32(L.k.seq), i32(L.v.batch),
             i32(L.v.head), i32(L.v.seq), i32(L.o.batch), i32(L.o.head), i32(L.o.seq), opt.block_m, opt.block_n, D,
             opt.causal);
  };
  if (opt.dtype == DType::bf16) return call(attention_kernel<bf16>());
  return call(attention_kernel<f16>());
}

detail::Layout contiguous_layout(const Shape &s) {
  return {contiguous_strides(s.heads, s.seqlen_q, s.head_dim), contiguous_strides(s.heads, s.seqlen_k, s.head_dim),
          contiguous_strides(s.heads, s.seqlen_k, s.head_dim), contiguous_strides(s.heads, s.seqlen_q, s.head_dim)};
}

// The kernel indexes with int32 arithmetic: every offset it forms must fit. Returns the furthest element.
int64_t check_strides(const Strides &st, int seqlen, const Shape &s, const char *name) {
  auto fail = [&](const std::string &why) {
    return TraceError(fmt::format("attention::forward_strided: tensor '{}' strides (batch {}, head {}, seq {}, dim {}) "
                                  "{}", name, st.batch, st.head, st.seq, st.dim, why));
  };
  if (st.dim != 1) throw fail("are not supported: the last dimension must be contiguous (stride 1)");
  if (st.batch < 0 || st.head < 0 || st.seq < 0) throw fail("must not be negative");
  // Computed exactly (strides near INT64_MAX must not wrap around to a small offset).
  const std::optional<int64_t> reach =
      kernels::last_offset({{std::max(s.batch, 1), st.batch}, {std::max(s.heads, 1), st.head},
                            {std::max(seqlen, 1), st.seq}, {s.head_dim, 1}});
  if (!reach) throw fail("address an element past 2^62, beyond the kernel's int32 indexing");
  const int64_t last = *reach;
  if (last > std::numeric_limits<int32_t>::max())
    throw fail(fmt::format("address element {}, beyond the kernel's int32 indexing", last));
  return last;
}

}  // namespace

namespace detail {

void launch(const Pointers &p, const Shape &s, const Layout &L, const Options &opt) {
  Grid grid{uint32_t((s.seqlen_q + opt.block_m - 1) / opt.block_m), uint32_t(s.batch * s.heads), 1};
  auto cfg = launch_config(opt);
  with_args(s, opt, L, p.q, p.k, p.v, p.out, p.lse,
            [&](auto &kernel, auto &&...args) { kernel.launch(grid, cfg, args...); });
}

autotune::Compiled compile(const Pointers &p, const Shape &s, const Layout &L, const Options &opt) {
  const ir::Function &fn = with_args(s, opt, L, p.q, p.k, p.v, p.out, p.lse, [&](auto &kernel, auto &&...args)
                                         -> const ir::Function & { return kernel.function(args...); });
  const runtime::LoadedKernel &k = runtime::get_kernel(fn, launch_config(opt));
  return autotune::compiled_of(k);
}

}  // namespace detail

Strides contiguous_strides(int heads, int seqlen, int head_dim) {
  int64_t seq = head_dim, head = int64_t(seqlen) * seq;
  return {int64_t(heads) * head, head, seq, 1};
}

double forward_flops(const Shape &s, bool causal) {
  double f = 4.0 * s.batch * s.heads * double(s.seqlen_q) * s.seqlen_k * s.head_dim;
  return causal ? f / 2 : f;
}

void forward(const Buffer &q, const Buffer &k, const Buffer &v, Buffer &out, Buffer &lse, const Shape &s,
             const Options &opt) {
  check_shape(s, opt);
  size_t esz = 2;
  auto need = [&](const Buffer &b, size_t bytes, const char *name) {
    if (b.bytes() < bytes)
      throw TraceError(std::string("attention::forward: buffer '") + name + "' holds " +
                       std::to_string(b.bytes()) + " bytes, the shape needs " + std::to_string(bytes));
  };
  size_t nq = size_t(s.batch) * s.heads * s.seqlen_q, nk = size_t(s.batch) * s.heads * s.seqlen_k;
  need(q, nq * s.head_dim * esz, "q");
  need(k, nk * s.head_dim * esz, "k");
  need(v, nk * s.head_dim * esz, "v");
  need(out, nq * s.head_dim * esz, "out");
  need(lse, nq * 4, "lse");
  if (nq == 0) return;
  bool gpu = resolve_backend(opt.backend) == Backend::GPU;
  for (const Buffer *b : {&q, &k, &v, static_cast<const Buffer *>(&out), static_cast<const Buffer *>(&lse)})
    if (b->on_gpu() != gpu)
      throw TraceError(fmt::format("attention::forward: a {} buffer was given for a launch on the {}{}",
                                   b->on_gpu() ? "GPU" : "host (interpreter)", gpu ? "GPU" : "CPU interpreter",
                                   runtime::auto_backend_note(opt.backend)));
  detail::Layout L = contiguous_layout(s);
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  forward_strided(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), s, L.q, L.k, L.v, L.o, opt);
}

void forward_strided(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const Shape &s,
                     const Strides &q_strides, const Strides &k_strides, const Strides &v_strides,
                     const Strides &o_strides, const Options &opt) {
  detail::Layout L{q_strides, k_strides, v_strides, o_strides};
  detail::Pointers p{q, k, v, out, lse};
  detail::validate(p, s, L, opt);
  if (int64_t(s.batch) * s.heads * s.seqlen_q == 0) return;
  if (opt.autotune && resolve_backend(opt.backend) == Backend::GPU) {
    detail::launch(p, s, L, detail::tuned_options(p, s, L, opt, {}, nullptr));
    return;
  }
  detail::launch(p, s, L, opt);
}

void detail::validate(const Pointers &p, const Shape &s, const Layout &L, const Options &opt) {
  check_shape(s, opt);
  if (int64_t(s.batch) * s.heads * s.seqlen_q == 0) return;
  auto extent = [&](DevicePtr d, int64_t last_element, size_t esz, const char *name) {
    if (d.address == 0) throw TraceError(fmt::format("attention::forward_strided: pointer '{}' is null", name));
    size_t need = size_t(last_element + 1) * esz;
    if (d.bytes != 0 && d.bytes < need)
      throw TraceError(fmt::format("attention::forward_strided: '{}' holds {} bytes, its shape and strides address {}",
                                   name, d.bytes, need));
  };
  extent(p.q, check_strides(L.q, s.seqlen_q, s, "q"), 2, "q");
  extent(p.k, check_strides(L.k, s.seqlen_k, s, "k"), 2, "k");
  extent(p.v, check_strides(L.v, s.seqlen_k, s, "v"), 2, "v");
  extent(p.out, check_strides(L.o, s.seqlen_q, s, "out"), 2, "out");
  extent(p.lse, int64_t(s.batch) * s.heads * s.seqlen_q - 1, 4, "lse");
}

std::string forward_ir(const Shape &s, const Options &opt) {
  check_shape(s, opt);
  DevicePtr p{};
  return with_args(s, opt, contiguous_layout(s), p, p, p, p, p,
                   [&](auto &kernel, auto &&...args) { return kernel.ir(args...); });
}

std::string forward_ptx(const Shape &s, const Options &opt) {
  check_shape(s, opt);
  DevicePtr p{};
  auto cfg = launch_config(opt);
  if (cfg.arch.empty()) cfg.arch = "sm_90a";
  return with_args(s, opt, contiguous_layout(s), p, p, p, p, p,
                   [&](auto &kernel, auto &&...args) { return kernel.ptx(cfg, args...).ptx; });
}

}  // namespace tilejit::attention
