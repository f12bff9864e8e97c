#include "codegen/layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tilejit/error.h"

namespace tilejit::codegen {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int log2_exact(int64_t v) {
  if (!is_pow2(v)) throw CompileError(fmt::format("codegen: layout size {} is not a power of two", v));
  int n = 0;
  while ((int64_t(1) << n) < v) ++n;
  return n;
}

int Layout::num_warps() const {
  int n = 1;
  for (int w : parent.warps_per_cta) n *= w;
  return n;
}

int64_t Layout::regs_along(int i) const {
  int k = dims[i];
  int64_t f = int64_t(parent.size_per_thread[k]) * parent.threads_per_warp[k] * parent.warps_per_cta[k];
  return parent.size_per_thread[k] * std::max<int64_t>(1, shape[i] / f);
}

int64_t Layout::num_regs() const {
  int64_t n = 1;
  for (int i = 0; i < rank(); ++i) n *= regs_along(i);
  return n;
}

std::vector<int64_t> Layout::reg_index(int64_t r) const {
  std::vector<int64_t> idx(rank());
  for (int i = rank() - 1; i >= 0; --i) {
    idx[i] = r % regs_along(i);
    r /= regs_along(i);
  }
  return idx;
}

int64_t Layout::reg_from_index(const std::vector<int64_t> &idx) const {
  int64_t r = 0;
  for (int i = 0; i < rank(); ++i) r = r * regs_along(i) + idx[i];
  return r;
}

int64_t Layout::reg_offset(int i, int64_t idx) const {
  int k = dims[i];
  int64_t s = parent.size_per_thread[k];
  int64_t f = s * parent.threads_per_warp[k] * parent.warps_per_cta[k];
  return (idx / s) * f + idx % s;
}

int Layout::lane_shift(int k) const {
  int shift = 0;
  for (int d : parent.order) {
    if (d == k) return shift;
    shift += log2_exact(parent.threads_per_warp[d]);
  }
  return shift;
}

int Layout::warp_shift(int k) const {
  int shift = 0;
  for (int d : parent.order) {
    if (d == k) return shift;
    shift += log2_exact(parent.warps_per_cta[d]);
  }
  return shift;
}

int Layout::lane_index(int lane, int k) const {
  return (lane >> lane_shift(k)) & (parent.threads_per_warp[k] - 1);
}
int Layout::warp_index(int warp, int k) const {
  return (warp >> warp_shift(k)) & (parent.warps_per_cta[k] - 1);
}

int64_t Layout::thread_base(int tid, int i) const {
  int k = dims[i];
  int64_t lane_k = lane_index(tid % 32, k), warp_k = warp_index(tid / 32, k);
  return (warp_k * parent.threads_per_warp[k] + lane_k) * parent.size_per_thread[k];
}

std::vector<int64_t> Layout::coord(int tid, int64_t r) const {
  auto idx = reg_index(r);
  std::vector<int64_t> c(rank());
  for (int i = 0; i < rank(); ++i) c[i] = (thread_base(tid, i) + reg_offset(i, idx[i])) & (shape[i] - 1);
  return c;
}

int Layout::tile_dim_of(int parent_dim) const {
  for (int i = 0; i < rank(); ++i)
    if (dims[i] == parent_dim) return i;
  return -1;
}

unsigned Layout::lane_replication_mask() const {
  unsigned mask = 0;
  for (int k = 0; k < parent.rank(); ++k) {
    int i = tile_dim_of(k), bits = log2_exact(parent.threads_per_warp[k]);
    int first = log2_exact(parent.size_per_thread[k]);
    for (int b = 0; b < bits; ++b)
      if (i < 0 || (int64_t(1) << (first + b)) >= shape[i]) mask |= 1u << (lane_shift(k) + b);
  }
  return mask;
}

unsigned Layout::warp_replication_mask() const {
  unsigned mask = 0;
  for (int k = 0; k < parent.rank(); ++k) {
    int i = tile_dim_of(k), bits = log2_exact(parent.warps_per_cta[k]);
    int first = log2_exact(parent.size_per_thread[k]) + log2_exact(parent.threads_per_warp[k]);
    for (int b = 0; b < bits; ++b)
      if (i < 0 || (int64_t(1) << (first + b)) >= shape[i]) mask |= 1u << (warp_shift(k) + b);
  }
  return mask;
}

bool Layout::reg_is_duplicate(int64_t r) const {
  auto idx = reg_index(r);
  for (int i = 0; i < rank(); ++i)
    if (idx[i] % parent.size_per_thread[dims[i]] >= shape[i]) return true;
  return false;
}

bool Layout::is_owner(int tid) const {
  return ((tid % 32) & lane_replication_mask()) == 0 && ((tid / 32) & warp_replication_mask()) == 0;
}

std::string Layout::str() const {
  auto list = [](const auto &v) { return fmt::format("[{}]", fmt::join(v, ",")); };
  return fmt::format("blocked<spt={} tpw={} wpc={} order={}> dims={} shape={}", list(parent.size_per_thread),
                     list(parent.threads_per_warp), list(parent.warps_per_cta), list(parent.order),
                     list(dims), list(shape));
}

Layout default_layout(const std::vector<int64_t> &shape, int num_warps) {
  int n = int(shape.size());
  if (n == 0) throw CompileError("codegen: a scalar has no layout");
  Layout l;
  l.shape = shape;
  auto &p = l.parent;
  p.size_per_thread.assign(n, 1);
  p.threads_per_warp.assign(n, 1);
  p.warps_per_cta.assign(n, 1);
  for (int k = n - 1; k >= 0; --k) p.order.push_back(k);
  p.size_per_thread[n - 1] = int(std::min<int64_t>(4, shape[n - 1]));
  int lanes = 32;
  for (int k = n - 1; k >= 0 && lanes > 1; --k) {
    int64_t want = std::max<int64_t>(1, shape[k] / p.size_per_thread[k]);
    p.threads_per_warp[k] = int(std::min<int64_t>(lanes, want));
    lanes /= p.threads_per_warp[k];
  }
  p.threads_per_warp[n - 1] *= lanes;  // leftover lanes replicate along the fastest dim
  int warps = num_warps;
  for (int k = 0; k < n && warps > 1; ++k) {
    int64_t want = std::max<int64_t>(1, shape[k] / (int64_t(p.size_per_thread[k]) * p.threads_per_warp[k]));
    p.warps_per_cta[k] = int(std::min<int64_t>(warps, want));
    warps /= p.warps_per_cta[k];
  }
  p.warps_per_cta[0] *= warps;  // leftover warps replicate along dim 0
  for (int i = 0; i < n; ++i) l.dims.push_back(i);
  return l;
}

Layout slice_layout(const Layout &l, int axis) {
  Layout r = l;
  r.dims.erase(r.dims.begin() + axis);
  r.shape.erase(r.shape.begin() + axis);
  return r;
}

Layout expand_layout(const Layout &l, int axis) {
  Layout r = l;
  std::vector<int> missing;
  for (int k = 0; k < l.parent.rank(); ++k)
    if (l.tile_dim_of(k) < 0) missing.push_back(k);
  int k;
  if (missing.size() == 1) {
    k = missing[0];
  } else {
    k = l.parent.rank();
    r.parent.size_per_thread.push_back(1);
    r.parent.threads_per_warp.push_back(1);
    r.parent.warps_per_cta.push_back(1);
    r.parent.order.push_back(k);
  }
  r.dims.insert(r.dims.begin() + axis, k);
  r.shape.insert(r.shape.begin() + axis, 1);
  return r;
}

Layout reshape_same_params(const Layout &l, const std::vector<int64_t> &shape) {
  Layout r = l;
  r.shape = shape;
  return r;
}

bool same_distribution(const Layout &a, const Layout &b) {
  if (a == b) return true;
  if (a.shape != b.shape || a.num_threads() != b.num_threads() || a.num_regs() != b.num_regs()) return false;
  for (int tid = 0; tid < a.num_threads(); ++tid)
    for (int64_t r = 0; r < a.num_regs(); ++r)
      if (a.coord(tid, r) != b.coord(tid, r)) return false;
  return true;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    s[size_t(i)] = acc;
    acc *= shape[size_t(i)];
  }
  return s;
}

}  // namespace tilejit::codegen
