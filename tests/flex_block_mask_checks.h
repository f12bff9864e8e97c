// Checks of the automatic block masks, shared by the CPU (interpreter) and GPU test binaries: masks that do
// not depend on the batch / head get one set of lists for all of them; masks that read no memory keep their
// block mask between calls, rebuilt whenever anything it was built from changes; masks that read a captured
// buffer are rebuilt every call. Every call is compared with the float64 reference on fresh random inputs
// (flex_reference.h); the build counters come from kernels/flex/flex_internal.h.
#pragma once
#include "flex_reference.h"
#include "kernels/flex/flex_internal.h"
#include "tilejit/ops.h"

namespace tilejit::testing {

/// What the calls inside f built: block masks, (batch, head) pairs with their own lists, cache hits.
struct Builds {
  uint64_t builds = 0, lists = 0, hits = 0;
};
template <class F> Builds count_builds(F &&f) {
  auto before = attention::flex::block_mask_stats();
  f();
  auto after = attention::flex::block_mask_stats();
  return {after.builds - before.builds, after.lists_built - before.lists_built, after.cache_hits - before.cache_hits};
}

/// A self-attention case of `shape` with the given block sizes.
inline FlexCase mask_case(attention::FlexShape shape, DType dt, int block_m, int block_n) {
  FlexCase c;
  c.shape = shape;
  c.dtype = dt;
  c.block_m = block_m;
  c.block_n = block_n;
  return c;
}

/// One mask per dependence: on neither b nor h, h only, b only, both (documents from a captured buffer
/// indexed through b). Each matches the float64 reference, and its build makes lists for exactly the batches
/// and heads it depends on.
inline void check_mask_dependence(Backend be, attention::FlexShape shape, DType dt, int block_m, int block_n) {
  using attention::Mask;
  const int B = shape.batch, H = shape.heads_q, S = shape.seqlen_q;
  REQUIRE(shape.seqlen_k == S);
  REQUIRE((B > 1 && H > 1));
  std::vector<int> docs(size_t(B) * S);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < S; ++i) docs[size_t(b) * S + i] = (i * 3 + b * 7) / 23;  // a few tokens per document
  Buffer ids(docs.size() * 4, be);
  ids.upload(docs);
  auto doc_ids = capture(ids, DType::i32);
  auto same_doc = [&docs, S](int b, int q, int kv) { return docs[size_t(b) * S + q] == docs[size_t(b) * S + kv]; };
  struct Case {
    const char *name;
    Mask mask;
    std::function<bool(int, int, int, int, int, int)> ref;
    uint64_t lists;
  };
  std::vector<Case> cases{
      {"causal window (neither b nor h)",
       Mask([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (kv >= q - 9); }),
       [](int, int, int q, int kv, int, int) { return kv <= q && kv >= q - 9; }, 1},
      {"a window per head (h only)",
       Mask([](Tile, Tile h, Tile q, Tile kv) { return (kv <= q) & (kv >= q - 3 - h * 11); }),
       [](int, int h, int q, int kv, int, int) { return kv <= q && kv >= q - 3 - h * 11; }, uint64_t(H)},
      {"a diagonal per batch (b only)",
       Mask([](Tile b, Tile, Tile q, Tile kv) { return kv <= q + b * 13 - 2; }),
       [](int b, int, int q, int kv, int, int) { return kv <= q + b * 13 - 2; }, uint64_t(B)},
      {"documents (b only, through the token index)", attention::document_mask(doc_ids),
       [&](int b, int, int q, int kv, int, int) { return same_doc(b, q, kv); }, uint64_t(B)},
      {"documents, odd heads causal (both)",
       Mask([doc_ids](Tile, Tile h, Tile q, Tile kv) {
         Tile t = doc_ids();
         Tile same = load(t + attention::mod_q_token(q)) == load(t + attention::mod_k_token(kv));
         return same & ((h % 2 == 0) | (kv <= q));
       }),
       [&](int b, int h, int q, int kv, int, int) { return same_doc(b, q, kv) && (h % 2 == 0 || kv <= q); },
       uint64_t(B) * H},
  };
  FlexCase c = mask_case(shape, dt, block_m, block_n);
  for (const Case &k : cases) {
    INFO(k.name << ", batch " << B << ", heads " << H << ", seqlen " << S << ", blocks " << block_m << "x" << block_n);
    attention::FlexOptions o;
    o.mask = k.mask;
    FlexResult r;
    Builds n = count_builds([&] { r = run_flex_case(be, c, o, {{}, k.ref}); });
    require_matches(r, dt);
    REQUIRE(n.builds == 1);
    REQUIRE(n.lists == k.lists);
  }
}

/// A mask that reads no memory is built once and reused; every change to what it was built from (a captured
/// scalar, the band, the lengths, the block sizes, the batch count it depends on) builds it again, and each
/// answer matches the reference. A stale mask would be caught: narrowing the window turns blocks the old lists
/// flag as fully visible into partial ones, which the kernel then leaves unmasked.
inline void check_mask_cache(Backend be, DType dt, int block_m, int block_n) {
  using attention::Mask;
  int width = 40;
  auto w = capture(int32_t(width));
  Mask m([w](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (kv >= q - w()); });
  std::optional<attention::Band> band;
  auto ref = [&](int, int, int q, int kv, int sq, int sk) {
    return kv <= q && kv >= q - width && (!band || ref_band(*band, q, kv, sq, sk));
  };
  attention::FlexShape shape{.batch = 2, .heads_q = 2, .seqlen_q = 150, .seqlen_k = 150, .head_dim_qk = 32};
  auto run = [&](attention::FlexShape s, int bm, int bn) {
    attention::FlexOptions o;
    o.mask = m;
    o.mask.band = band;
    FlexResult r;
    Builds n = count_builds([&] { r = run_flex_case(be, mask_case(s, dt, bm, bn), o, {{}, ref}); });
    require_matches(r, dt);
    return n;
  };
  auto built = [](Builds n) { return n.builds == 1 && n.hits == 0; };
  auto reused = [](Builds n) { return n.builds == 0 && n.hits == 1; };
  attention::flex::clear_auto_block_masks();
  CHECK(built(run(shape, block_m, block_n)));
  CHECK(reused(run(shape, block_m, block_n)));
  // Another batch count: the lists are shared by every batch, so they still serve.
  attention::FlexShape more = shape;
  more.batch = 3;
  CHECK(reused(run(more, block_m, block_n)));
  w.set_int(width = 3);
  CHECK(built(run(shape, block_m, block_n)));
  CHECK(reused(run(shape, block_m, block_n)));
  attention::FlexShape longer = shape;
  longer.seqlen_q = longer.seqlen_k = 170;
  CHECK(built(run(longer, block_m, block_n)));
  CHECK(built(run(shape, block_m * 2, block_n)));
  band = attention::Band{1, -1};  // also hides keys more than one before the query
  CHECK(built(run(shape, block_m, block_n)));
  band = attention::Band{2, -1};
  CHECK(built(run(shape, block_m, block_n)));
  CHECK(reused(run(shape, block_m, block_n)));
  // The earlier shape is still cached (until 16 newer masks push it out).
  band.reset();
  CHECK(reused(run(shape, block_m, block_n)));
  w.set_int(width = 40);
  CHECK(reused(run(shape, block_m, block_n)));  // the first call's mask: built for these very values

  // A mask that depends on b is cached per batch count.
  Mask per_b([](Tile b, Tile, Tile q, Tile kv) { return kv <= q + b * 5; });
  auto ref_b = [](int b, int, int q, int kv, int, int) { return kv <= q + b * 5; };
  auto run_b = [&](attention::FlexShape s) {
    attention::FlexOptions o;
    o.mask = per_b;
    FlexResult r;
    Builds n = count_builds([&] { r = run_flex_case(be, mask_case(s, dt, block_m, block_n), o, {{}, ref_b}); });
    require_matches(r, dt);
    return n;
  };
  CHECK(built(run_b(shape)));
  CHECK(reused(run_b(shape)));
  CHECK(built(run_b(more)));
  REQUIRE(attention::flex::clear_auto_block_masks() > 0);
  CHECK(built(run_b(shape)));
}

/// A mask that reads a captured buffer is built on every call: new contents at the same address give the new
/// answer (a reused mask would not: the documents below move their boundaries).
inline void check_mask_reads_buffer(Backend be, DType dt, int block_m, int block_n) {
  const int B = 2, S = 130;
  attention::FlexShape shape{.batch = B, .heads_q = 2, .seqlen_q = S, .seqlen_k = S, .head_dim_qk = 32};
  std::vector<int> docs(size_t(B) * S);
  Buffer ids(docs.size() * 4, be);
  attention::FlexOptions o;
  o.mask = attention::document_mask(capture(ids, DType::i32));
  auto ref = [&](int b, int, int q, int kv, int, int) { return docs[size_t(b) * S + q] == docs[size_t(b) * S + kv]; };
  for (int doc_len : {S, 37, 5, 37}) {
    INFO("documents of " << doc_len << " tokens");
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < S; ++i) docs[size_t(b) * S + i] = (i + b * 3) / doc_len;
    ids.upload(docs);
    FlexResult r;
    Builds n = count_builds([&] { r = run_flex_case(be, mask_case(shape, dt, block_m, block_n), o, {{}, ref}); });
    require_matches(r, dt);
    CHECK(n.builds == 1);
    CHECK(n.hits == 0);
    CHECK(n.lists == uint64_t(B));  // documents depend on b (the token index), not on h
  }
}

}  // namespace tilejit::testing
