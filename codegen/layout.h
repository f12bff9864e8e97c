// Distributed layouts: which thread of a program holds which elements of a tile in which register.
// Pure arithmetic (no LLVM), unit-tested against brute force in tests/test_codegen_layout.cpp.
//
// A *blocked* layout over a parent rank P gives, per parent dim k: size_per_thread s_k, threads_per_warp
// t_k (∏ t_k = 32), warps_per_cta w_k (∏ w_k = num_warps) and an order (fastest dim first) used to split
// the lane id and the warp id into per-dim indices. A tile Layout = parent + `dims` (tile dim i ↦ parent
// dim dims[i]; parent dims not named are replicated: a *slice* layout) + the tile shape.
//
// For tile dim i mapped to parent dim k, footprint F_k = s_k·t_k·w_k, repetitions R_i = max(1, shape_i/F_k):
// a thread holds s_k·R_i registers along i; register index along i is idx = rep·s_k + j and holds
// coordinate (rep·F_k + (warp_k·t_k + lane_k)·s_k + j) mod shape_i. Registers enumerate the row-major
// product of the per-dim register indices (last tile dim fastest). Every size is a power of two, so the
// coordinate is a bit concatenation [j | lane_k | warp_k | rep] truncated to log2(shape_i) bits: the bits
// that fall at or above log2(shape_i) are *replication bits* (threads or registers holding copies).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tilejit/export.h"

namespace tilejit::codegen {

struct BlockedLayout {
  std::vector<int> size_per_thread;   // s_k
  std::vector<int> threads_per_warp;  // t_k, product 32
  std::vector<int> warps_per_cta;     // w_k, product num_warps
  std::vector<int> order;             // parent dims, fastest first
  int rank() const { return int(size_per_thread.size()); }
  friend bool operator==(const BlockedLayout &, const BlockedLayout &) = default;
};

struct TILEJIT_EXPORT Layout {
  BlockedLayout parent;
  std::vector<int> dims;          // tile dim i → parent dim
  std::vector<int64_t> shape;     // tile shape (powers of two)

  int rank() const { return int(dims.size()); }
  int num_warps() const;
  int num_threads() const { return 32 * num_warps(); }
  /// Registers along tile dim i (s_k · R_i) and in total.
  int64_t regs_along(int i) const;
  int64_t num_regs() const;
  /// Per-dim register indices of register r (row-major decomposition) and back.
  std::vector<int64_t> reg_index(int64_t r) const;
  int64_t reg_from_index(const std::vector<int64_t> &idx) const;
  /// Compile-time part of the coordinate of register index `idx` along tile dim i: rep·F_k + j (not reduced
  /// mod shape); OR it with thread_base(tid, i) and mask with shape_i-1 to get the coordinate.
  int64_t reg_offset(int i, int64_t idx) const;
  /// Thread-dependent part along tile dim i: (warp_k·t_k + lane_k)·s_k (not reduced mod shape).
  int64_t thread_base(int tid, int i) const;
  /// Coordinates of register r in thread tid.
  std::vector<int64_t> coord(int tid, int64_t r) const;
  /// Lane index and warp index of a thread along parent dim k.
  int lane_index(int lane, int k) const;
  int warp_index(int warp, int k) const;
  /// Bit position of parent dim k's index inside the lane id / warp id (the order decides).
  int lane_shift(int k) const;
  int warp_shift(int k) const;
  /// Lane-id / warp-id bits that do not change any coordinate (copies of the same elements).
  unsigned lane_replication_mask() const;
  unsigned warp_replication_mask() const;
  /// True when register r duplicates a register with a smaller index (j ≥ shape_i along some dim).
  bool reg_is_duplicate(int64_t r) const;
  /// The owner of an element is the thread whose replication bits are all zero (one per element).
  bool is_owner(int tid) const;
  /// Tile dim holding parent dim k, or -1 when k is sliced away.
  int tile_dim_of(int parent_dim) const;

  std::string str() const;
  friend bool operator==(const Layout &, const Layout &) = default;
};

/// The default blocked layout of `shape` for num_warps: order fastest = last dim, s_last = min(4, shape_last),
/// lanes filled along the last dim first, warps along dim 0 first; leftovers replicate.
TILEJIT_EXPORT Layout default_layout(const std::vector<int64_t> &shape, int num_warps);
/// Drops tile dim `axis` (the parent keeps it; it becomes replicated).
TILEJIT_EXPORT Layout slice_layout(const Layout &l, int axis);
/// Inserts a size-1 tile dim at `axis`: maps it to the parent dim that l slices away when there is exactly
/// one (the inverse of slice_layout); otherwise adds a trivial parent dim (s = t = w = 1).
TILEJIT_EXPORT Layout expand_layout(const Layout &l, int axis);
/// Same distribution over a new shape of the same rank (broadcast of size-1 dims).
TILEJIT_EXPORT Layout reshape_same_params(const Layout &l, const std::vector<int64_t> &shape);
/// True when both layouts (same shape and thread count) give every (thread, register) the same coordinate.
TILEJIT_EXPORT bool same_distribution(const Layout &a, const Layout &b);

/// Element strides of a row-major tile of `shape` (last dim 1).
TILEJIT_EXPORT std::vector<int64_t> row_major_strides(const std::vector<int64_t> &shape);

TILEJIT_EXPORT int log2_exact(int64_t v);  // v must be a power of two
TILEJIT_EXPORT bool is_pow2(int64_t v);

}  // namespace tilejit::codegen
