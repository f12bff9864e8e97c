// DecodePlan: a decode step over a paged KV cache, as the flex kernel with GQA packing and a KV split, plus the
// combine kernel. Everything that can fail, allocate or compile happens in the constructor; run() binds the
// pointers and launches.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "kernels/launch_options.h"
#include "kernels/paged/decode_combine.h"
#include "kernels/paged/decode_tiling.h"
#include "kernels/paged/paged_cache.h"
#include "runtime/runtime.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/paged_attention.h"

namespace tilejit::attention {

using namespace flex;

namespace {

constexpr const char *kOp = "attention::DecodePlan";

bool same_layout(const PagedKVCache &a, const PagedKVCache &b) {
  return a.dtype == b.dtype && a.num_pages == b.num_pages && a.page_size == b.page_size && a.heads_kv == b.heads_kv &&
         a.head_dim == b.head_dim && a.head_dim_v == b.head_dim_v && a.max_pages_per_seq == b.max_pages_per_seq &&
         a.page_stride == b.page_stride && a.token_stride == b.token_stride && a.head_stride == b.head_stride &&
         a.block_table_stride == b.block_table_stride;
}

}  // namespace

struct DecodePlan::Impl {
  DecodeShape shape;
  PagedKVCache layout;  // the plan's cache layout (pointers as given to the constructor)
  FlexShape s;
  FlexOptions o;
  Plan p;
  std::shared_ptr<KernelBase> attention, combine;
  std::vector<detail::ArgValue> args, combine_args;
  Grid grid, combine_grid;
  LaunchConfig cfg, combine_cfg;
  Buffer scratch;      // partial outputs, then partial lse (splits only)
  Buffer lse_scratch;  // the final lse when run() is given none
  int64_t rows = 0;    // batch · seqlen_q · heads_q
  /// The band the mask function implies (mask_band.cpp), when the plan uses one: run() takes its sides at the
  /// captures' values of the call (a window's size captured as an integer).
  std::shared_ptr<const ImpliedBand> implied_band;
};

namespace paged {

void check_decode_request(const DecodeShape &shape, const CacheLayout &l, const DecodeOptions &opt, const char *op) {
  auto fail = [&](const std::string &why) { return TraceError(fmt::format("{}: {}", op, why)); };
  if (shape.batch < 0 || shape.heads_q < 1 || shape.max_seq_len < 0)
    throw fail(fmt::format("batch {} must be ≥ 0, heads_q {} ≥ 1 and max_seq_len {} ≥ 0", shape.batch,
                           shape.heads_q, shape.max_seq_len));
  if (shape.seqlen_q < 1 || shape.seqlen_q > 16)
    throw fail(fmt::format("seqlen_q {} must be in 1 … 16 (new tokens per sequence)", shape.seqlen_q));
  if (shape.heads_q % l.heads_kv != 0)
    throw fail(fmt::format("heads_q ({}) must be a multiple of the cache's heads_kv ({})", shape.heads_q, l.heads_kv));
  // One program holds a KV head's query heads × new tokens as the rows of its tiles (at most 256).
  if (int64_t(shape.heads_q / l.heads_kv) * shape.seqlen_q > 256)
    throw fail(fmt::format("heads_q / heads_kv × seqlen_q = {} / {} × {} query rows per KV head; at most 256",
                           shape.heads_q, l.heads_kv, shape.seqlen_q));
  if (opt.num_splits > paged::kMaxSplits)
    throw fail(fmt::format("num_splits {} is above the largest supported, {}", opt.num_splits, paged::kMaxSplits));
  if (opt.num_splits < 0) throw fail(fmt::format("num_splits {} must not be negative", opt.num_splits));
  // Given ones (0: the plan's choice; negative ones are named here too) as the flex kernel takes them; BLOCK_M is
  // always the plan's.
  if (std::string e = kernels::tile_options_error(0, opt.block_n, opt.num_warps, opt.num_stages, true); !e.empty())
    throw fail(e);
  if (shape.batch > 65535 || shape.heads_q > 65535)
    throw fail(fmt::format("heads_q {} and batch {} must each be ≤ 65535 (grid y and z)", shape.heads_q, shape.batch));
}

}  // namespace paged

DecodePlan::DecodePlan(const DecodeShape &shape, const PagedKVCache &cache, const DecodeOptions &opt)
    : impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  auto fail = [](const std::string &why) { return TraceError(fmt::format("{}: {}", kOp, why)); };
  const paged::CacheLayout c = paged::cache_layout(cache, kOp);
  paged::check_decode_request(shape, c, opt, kOp);
  m.shape = shape;
  m.layout = cache;
  const int group = shape.heads_q / c.heads_kv, dq = c.head_dim, dv = c.head_dim_v;
  const int64_t cache_tokens = int64_t(cache.max_pages_per_seq) * cache.page_size;
  if (shape.max_seq_len == 0 && cache_tokens > INT32_MAX)
    throw fail(fmt::format("max_pages_per_seq {} × page_size {} exceeds 2^31 − 1 tokens per sequence",
                           cache.max_pages_per_seq, cache.page_size));
  const int max_len = shape.max_seq_len > 0 ? shape.max_seq_len : int(cache_tokens);

  m.s = FlexShape{shape.batch, shape.heads_q, c.heads_kv, shape.seqlen_q, std::max(max_len, 1), dq, dv};
  FlexOptions &o = m.o;
  o.score_mod = opt.score_mod;
  o.mask = with_implied_band(opt.mask);
  if (o.mask.band && !opt.mask.band) m.implied_band = implied_band(opt.mask.fn);
  o.softmax_scale = opt.softmax_scale;
  o.dtype = cache.dtype;
  o.kv_cache = &m.layout;
  // q / out [batch, seqlen_q, heads_q, d] in the (batch, head, seq, dim) strides of FlexOptions.
  const int64_t hq = shape.heads_q;
  o.q_strides = {shape.seqlen_q * hq * dq, dq, hq * dq, 1};
  o.o_strides = {shape.seqlen_q * hq * dv, dv, hq * dv, 1};
  // Rows: the group's query heads × the new tokens, in one tile of at most 64 rows where they fit (more
  // rows than that only add registers; the K/V reads are what count).
  const int rows_wanted = int(std::bit_ceil(unsigned(group * shape.seqlen_q)));
  o.block_m = std::clamp(rows_wanted, 16, std::max(64, int(std::bit_ceil(unsigned(group)))));
  o.backend = opt.backend;
  o.arch = opt.arch;
  const Backend backend = resolve_backend(opt.backend);
  const int sms = backend == Backend::GPU ? device_info().sm_count : 132;
  const DevicePtr aligned{256, 0};  // the kernels are compiled for 16-byte aligned pointers; run() binds the real ones
  m.attention = flex_kernel(o.dtype, o.score_mod, o.mask);

  // The tiling and splits (decode_tiling.h): on the GPU, for short sequences, each candidate is compiled to
  // learn its programs per SM (registers and shared memory decide it).
  using paged::kTilings;
  using paged::Tiling;
  const bool caller_tiles = opt.block_n > 0 || opt.num_warps > 0 || opt.num_stages > 0;
  const Tiling first = caller_tiles ? Tiling{opt.block_n > 0 ? opt.block_n : kTilings[0].block_n,
                                             opt.num_warps > 0 ? opt.num_warps : kTilings[0].num_warps,
                                             opt.num_stages > 0 ? opt.num_stages : kTilings[0].num_stages, 0}
                                    : kTilings[0];
  m.rows = int64_t(shape.batch) * shape.seqlen_q * hq;
  // The plan for tiling t and n splits (the partial outputs' pointers placeholders until the scratch exists).
  auto derive = [&](const Tiling &t, int n) {
    o.block_n = t.block_n;
    o.num_warps = t.num_warps;
    o.num_stages = t.num_stages;
    o.min_ctas_per_sm = t.min_ctas_per_sm;
    m.p = plan(m.s, o, kOp);
    pack_gqa(m.p, m.s, o.block_m, kOp);
    m.p.frame_for_any_captures = true;  // run() launches with the captures' values then
    // lse [batch, seqlen_q, heads_q].
    m.p.lse_b = shape.seqlen_q * hq;
    m.p.lse_h = 1;
    m.p.lse_s = hq;
    m.p.last_lse = m.rows - 1;
    m.cfg = launch_config(o);
    if (int64_t(m.p.nqb) * n > INT32_MAX)
      throw fail(fmt::format("{} query blocks × {} splits exceed the grid", m.p.nqb, n));
    m.p.num_splits = n;
    if (n > 1) {
      m.p.part_stride_o = m.rows * dv;
      m.p.part_stride_l = m.rows;
      m.p.o_part = m.p.lse_part = aligned;
      if (std::max(n * m.p.part_stride_o, n * m.p.part_stride_l) + 256 > INT32_MAX) m.p.large = true;
    }
  };
  // The kernel's arguments for the current plan: the probes and the final kernel are specialized alike.
  auto plan_args = [&] {
    return kernel_args(m.p, m.s, o, aligned, cache.k_pages, cache.v_pages, aligned, aligned, nullptr);
  };
  derive(first, 1);
  paged::TilingProblem problem;
  problem.programs = int64_t(m.p.nqb) * c.heads_kv * shape.batch;  // the query blocks do not depend on the tiling
  problem.max_len = max_len;
  problem.num_splits = opt.num_splits;
  problem.sms = sms;
  problem.search = !caller_tiles && backend == Backend::GPU && max_len <= paged::kOneWaveMaxKeys && m.rows > 0;
  problem.first = first;
  const paged::TilingChoice choice = paged::choose_tiling(problem, [&](const Tiling &t, int n) {
    derive(t, n);
    const runtime::LoadedKernel &k = runtime::get_kernel(m.attention->function(plan_args()), m.cfg);
    return k.spill_stores > 0 ? 0 : std::max(k.programs_per_sm, 1);
  });
  derive(choice.tiling, choice.num_splits);
  if (m.p.num_splits > 1) {
    size_t o_bytes = size_t(m.p.num_splits) * size_t(m.p.part_stride_o) * 4;
    size_t l_bytes = size_t(m.p.num_splits) * size_t(m.p.part_stride_l) * 4;
    if (o_bytes + l_bytes > 0) m.scratch = Buffer(o_bytes + l_bytes, backend);
    m.p.o_part = DevicePtr{m.scratch.address(), o_bytes};
    m.p.lse_part = DevicePtr{m.scratch.address() + o_bytes, l_bytes};
  }
  if (m.rows > 0) m.lse_scratch = Buffer(size_t(m.rows) * 4, backend);

  // The kernels, traced, compiled and loaded now for pointers of the given alignment (16 bytes where the cache's
  // pointers have it; run() binds the real ones).
  m.grid = grid(m.p, m.s);
  m.args = plan_args();
  if (m.rows > 0) m.attention->prepare(m.cfg, m.args);
  if (m.p.num_splits > 1) {
    m.combine = paged::combine_kernel(o.dtype);
    m.combine_args.resize(paged::kNumCombineParams);
    m.combine_args[paged::cOPart] = ptr_arg(m.p.o_part);
    m.combine_args[paged::cLsePart] = ptr_arg(m.p.lse_part);
    m.combine_args[paged::cO] = ptr_arg(aligned);
    m.combine_args[paged::cLse] = ptr_arg(aligned);
    m.combine_args[paged::cNumSplits] = int_arg(m.p.num_splits);
    m.combine_args[paged::cPartStrideO] = int_arg(m.p.part_stride_o);
    m.combine_args[paged::cPartStrideL] = int_arg(m.p.part_stride_l);
    m.combine_args[paged::cDimV] = int_arg(dv);
    m.combine_args[paged::cPadV] = int_arg(next_pow2_at_least_16(dv));
    m.combine_args[paged::cSplitsPad] = int_arg(int(std::bit_ceil(unsigned(m.p.num_splits))));
    m.combine_args[paged::cLarge] = int_arg(m.p.large);
    if (m.rows > INT32_MAX) throw fail(fmt::format("{} rows exceed the combine kernel's grid", m.rows));
    m.combine_grid = Grid{uint32_t(m.rows)};
    // One row's splits × head dim in f32: about 16 values per thread.
    m.combine_cfg.num_warps = std::clamp(int(std::bit_ceil(unsigned(m.p.num_splits))) * dv / 512, 4, 16);
    m.combine_cfg.backend = opt.backend;
    m.combine_cfg.arch = opt.arch;
    if (m.rows > 0) m.combine->prepare(m.combine_cfg, m.combine_args);
  }
}

DecodePlan::~DecodePlan() = default;
DecodePlan::DecodePlan(DecodePlan &&) noexcept = default;
DecodePlan &DecodePlan::operator=(DecodePlan &&) noexcept = default;

// A moved-from plan holds nothing: using it is an error rather than a null dereference.
const DecodePlan::Impl &DecodePlan::impl(const char *what) const {
  if (!impl_) throw TraceError(fmt::format("{}::{}: this plan was moved from (a moved-from plan may only be destroyed or "
                                           "assigned to)", kOp, what));
  return *impl_;
}

int DecodePlan::num_splits() const { return impl("num_splits").p.num_splits; }
int DecodePlan::block_n() const { return impl("block_n").o.block_n; }
size_t DecodePlan::scratch_bytes() const { return impl("scratch_bytes").scratch.bytes(); }

std::string DecodePlan::ptx(const std::string &arch) const {
  const Impl &m = impl("ptx");
  LaunchConfig cfg = m.cfg, ccfg = m.combine_cfg;
  cfg.arch = ccfg.arch = arch;
  std::string text = m.attention->ptx(cfg, m.args).ptx;
  if (m.combine) text += m.combine->ptx(ccfg, m.combine_args).ptx;
  return text;
}

void DecodePlan::run(DevicePtr q, DevicePtr out, DevicePtr lse, const PagedKVCache &cache, Stream *stream) const {
  const Impl &m = impl("run");
  if (!same_layout(cache, m.layout))
    throw TraceError(fmt::format("{}::run: the cache's layout (page size {}, {} pages, {} KV heads, dims {}/{}, "
                                 "page/token/head strides {}/{}/{}) differs from the plan's (page size {}, {} pages, "
                                 "{} KV heads, dims {}/{}, strides {}/{}/{})",
                                 kOp, cache.page_size, cache.num_pages, cache.heads_kv, cache.head_dim,
                                 cache.head_dim_v, cache.page_stride, cache.token_stride, cache.head_stride,
                                 m.layout.page_size, m.layout.num_pages, m.layout.heads_kv, m.layout.head_dim,
                                 m.layout.head_dim_v, m.layout.page_stride, m.layout.token_stride,
                                 m.layout.head_stride));
  if (m.rows == 0) return;
  for (auto [ptr, name] : {std::pair{q, "q"}, std::pair{out, "out"}})
    if (ptr.address == 0) throw TraceError(fmt::format("{}::run: pointer '{}' is null", kOp, name));
  paged::check_cache_buffers(cache, m.p.cache, m.shape.batch, kOp);  // same_layout: the plan's layout
  auto extent = [&](DevicePtr d, int64_t elems, size_t esz, const char *name) {
    if (d.bytes != 0 && d.bytes < size_t(elems) * esz)
      throw TraceError(fmt::format("{}::run: '{}' holds {} bytes; [batch {}, seqlen_q {}, heads_q {}] needs {}", kOp,
                                   name, d.bytes, m.shape.batch, m.shape.seqlen_q, m.shape.heads_q,
                                   size_t(elems) * esz));
  };
  extent(q, m.rows * m.s.head_dim_qk, 2, "q");
  extent(out, m.rows * m.p.dim_v, 2, "out");
  if (lse.address) extent(lse, m.rows, 4, "lse");
  DevicePtr lse_out = lse.address ? lse : DevicePtr{m.lse_scratch.address(), m.lse_scratch.bytes()};
  std::vector<detail::ArgValue> a = m.args;
  a[kQ] = ptr_arg(q);
  a[kK] = ptr_arg(cache.k_pages);
  a[kV] = ptr_arg(cache.v_pages);
  a[kO] = ptr_arg(out);
  a[kLse] = ptr_arg(lse_out);
  a[kBlockTable] = ptr_arg(cache.block_table);
  a[kSeqLens] = ptr_arg(cache.seq_lens);
  // The kernels were compiled for the plan's pointer alignments (16 bytes or not: part of their
  // specialization); another alignment here would trace and compile a new kernel inside run().
  for (int i : {kQ, kK, kV, kO, kLse, kBlockTable, kSeqLens}) {
    bool planned = m.args[size_t(i)].address % 16 == 0, now = a[size_t(i)].address % 16 == 0;
    if (planned != now)
      throw TraceError(fmt::format("{}::run: pointer '{}' (0x{:x}) is {}16-byte aligned, the plan's was {}: the "
                                   "planned kernels assume the plan's alignment (16-byte aligned buffers always "
                                   "match a plan made with them)",
                                   kOp, m.attention->param_name(i), a[size_t(i)].address, now ? "" : "not ",
                                   planned ? "aligned" : "not"));
  }
  if (m.implied_band) {  // unbounded sides where the captures' values no longer bound them
    // Each side keeps the plan's divisibility by 16, part of the compiled kernel's specialization, so that run()
    // compiles nothing: a side widened to the next value of that kind still holds every visible key.
    auto planned_kind = [](int64_t planned, int64_t now) {
      if ((planned % 16 == 0) == (now % 16 == 0)) return now;
      return planned % 16 == 0 ? (now + 15) / 16 * 16 : now + 1;
    };
    const BandArgs band = band_args(band_at_call(*m.implied_band));
    a[kBandLeft] = int_arg(planned_kind(m.args[kBandLeft].i, band.left));
    a[kBandRight] = int_arg(planned_kind(m.args[kBandRight].i, band.right));
  }
  LaunchConfig cfg = m.cfg;
  cfg.stream = stream;
  m.attention->launch(m.grid, cfg, a);
  if (m.combine) {
    std::vector<detail::ArgValue> ca = m.combine_args;
    ca[paged::cO] = ptr_arg(out);
    ca[paged::cLse] = ptr_arg(lse_out);
    LaunchConfig ccfg = m.combine_cfg;
    ccfg.stream = stream;
    m.combine->launch(m.combine_grid, ccfg, ca);
  }
}

void paged_decode(DevicePtr q, DevicePtr out, DevicePtr lse, const PagedKVCache &cache, const DecodeShape &shape,
                  const DecodeOptions &opt, Stream *stream) {
  DecodePlan(shape, cache, opt).run(q, out, lse, cache, stream);
}

}  // namespace tilejit::attention
