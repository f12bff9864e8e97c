// The automatic block masks of flex_forward (BlockMaskMode::Auto): a mask whose function reads no memory is a
// function of its arguments, the lengths and its captured scalars alone, so its block mask is kept and reused
// while all of those stay the same; one that reads memory (captured buffers, varlen offsets) is built per
// call, since the memory may have changed since. A reused mask is never stale: everything the build read is
// in the key, and the function itself is pinned (the entry keeps a copy, so its identity is not reused).
#include <cstring>
#include <list>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/flex/flex_internal.h"
#include "runtime/driver.h"

namespace tilejit::attention::flex {
namespace {

constexpr size_t kMaxEntries = 16;
constexpr size_t kMaxBytes = size_t(256) << 20;

/// A captured value as the build saw it.
struct CaptureValue {
  int kind = 0;
  uint64_t address = 0;
  int64_t i = 0;
  uint64_t f_bits = 0;
  auto operator<=>(const CaptureValue &) const = default;
};

struct Key {
  const void *fn = nullptr;
  bool has_band = false;
  int64_t band_left = 0, band_right = 0, band_bottom_right = 0;
  int seqlen_q = 0, seqlen_k = 0, lists_b = 0, lists_h = 0, batch = 0, heads = 0, block_m = 0, block_n = 0;
  Backend backend = Backend::GPU;
  std::vector<CaptureValue> captures;
  auto operator<=>(const Key &) const = default;
};

struct Entry {
  Key key;
  MaskFn fn;  // pins the function's identity while its mask is cached
  std::shared_ptr<const BlockMask> mask;
  size_t bytes = 0;
};

struct Cache {
  std::mutex mu;
  std::list<Entry> entries;  // most recently used first
  size_t bytes = 0;
};
/// Never destroyed: its buffers must not be freed after the driver has gone at exit (the process's end
/// releases the memory anyway).
Cache &cache() {
  static Cache *c = new Cache;
  return *c;
}

/// Before freeing block masks a queued kernel may still read.
void wait_for_device(Backend be) {
  if (be == Backend::GPU) runtime::check(runtime::driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

Key key_of(const Mask &mask, const MaskAnalysis &an, const FlexShape &s, const FlexOptions &opt) {
  Key k;
  k.fn = mask.fn.identity();
  BandArgs band = band_args(mask.band);
  k.has_band = mask.band.has_value();
  k.band_left = band.left;
  k.band_right = band.right;
  k.band_bottom_right = band.bottom_right;
  k.seqlen_q = s.seqlen_q;
  k.seqlen_k = s.seqlen_k;
  k.lists_b = an.reads_b;
  k.lists_h = an.reads_h;
  // The counts of batches / heads matter only where they have their own lists.
  k.batch = an.reads_b ? s.batch : std::min(s.batch, 1);
  k.heads = an.reads_h ? s.heads_q : std::min(s.heads_q, 1);
  k.block_m = opt.block_m;
  k.block_n = opt.block_n;
  k.backend = resolve_backend(opt.backend);
  for (const auto &c : an.captures) {
    CaptureValue v;
    v.kind = int(c->kind);
    v.address = c->address;
    v.i = c->i;
    std::memcpy(&v.f_bits, &c->f, sizeof v.f_bits);
    k.captures.push_back(v);
  }
  return k;
}

}  // namespace

std::shared_ptr<const BlockMask> auto_block_mask(const Mask &mask, const FlexShape &s, const FlexOptions &opt) {
  const bool varlen = opt.cu_seqlens_q.address != 0;
  auto build = [&] { return std::make_shared<const BlockMask>(create_block_mask(mask, s, opt)); };
  if (!mask.fn || varlen) return build();
  std::shared_ptr<const MaskAnalysis> an = analyze_mask(mask.fn, varlen);
  if (an->reads_memory) return build();
  Key key = key_of(mask, *an, s, opt);
  Cache &c = cache();
  {
    std::lock_guard lock(c.mu);
    for (auto it = c.entries.begin(); it != c.entries.end(); ++it)
      if (it->key == key) {
        c.entries.splice(c.entries.begin(), c.entries, it);
        count_block_mask_cache_hit();
        return it->mask;
      }
  }
  std::shared_ptr<const BlockMask> bm = build();
  size_t bytes = bm->kv_blocks.bytes() + bm->counts.bytes();
  if (bytes > kMaxBytes) return bm;
  // Later calls may read it from another stream: the build must be complete before any of them runs.
  if (key.backend == Backend::GPU) {
    if (opt.stream) opt.stream->synchronize();
    else wait_for_device(key.backend);
  }
  std::list<Entry> evicted;
  {
    std::lock_guard lock(c.mu);
    for (const Entry &e : c.entries)
      if (e.key == key) return bm;  // another thread built the same meanwhile: keep one
    c.entries.push_front(Entry{std::move(key), mask.fn, bm, bytes});
    c.bytes += bytes;
    while (c.entries.size() > kMaxEntries || c.bytes > kMaxBytes) {
      c.bytes -= c.entries.back().bytes;
      evicted.splice(evicted.begin(), c.entries, std::prev(c.entries.end()));
    }
  }
  for (const Entry &e : evicted) wait_for_device(e.key.backend);
  return bm;
}

size_t clear_auto_block_masks() {
  Cache &c = cache();
  std::list<Entry> dropped;
  {
    std::lock_guard lock(c.mu);
    dropped.swap(c.entries);
    c.bytes = 0;
  }
  for (const Entry &e : dropped) wait_for_device(e.key.backend);
  return dropped.size();
}

}  // namespace tilejit::attention::flex
