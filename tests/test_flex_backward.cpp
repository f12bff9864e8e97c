// flex_backward on the interpreter against float64 gradients: no mod, bands, built-in and user mods, mask
// functions with rows that see no key and their block masks (built, reused, given, off, transposed), GQA/MQA,
// varlen, odd lengths and padded head dims; determinism; its
// errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "flex_backward_checks.h"
#include "kernels/flex/flex_internal.h"
#include "tilejit/paged_attention.h"
#include "test_codegen_util.h"
#include "tilejit/capture.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::testing;
using attention::Align;
using attention::FlexOptions;
using Catch::Matchers::Contains;
using codegen::testing::contains;
using codegen::testing::ptxas_v;

namespace {

FlexCase small_case(int heads_q, int heads_kv, int sq, int sk, int d, int dv = 0) {
  FlexCase c;
  c.shape.batch = 2;
  c.shape.heads_q = heads_q;
  c.shape.heads_kv = heads_kv;
  c.shape.seqlen_q = sq;
  c.shape.seqlen_k = sk;
  c.shape.head_dim_qk = d;
  c.shape.head_dim_v = dv;
  return c;
}

}  // namespace

TEST_CASE("flex_backward (interpreter): gradients of every mod and mask kind against float64", "[flex][backward]") {
  check_backward_variants(Backend::Interpreter, small_case(4, 2, 37, 53, 32));
  // BLOCK_N = 2·BLOCK_M: the dQ kernel tiles the other way round (programs own 32 queries, step 16 keys).
  FlexCase wide = small_case(4, 2, 37, 53, 32);
  wide.block_n = 32;
  check_backward_variants(Backend::Interpreter, wide);
}

TEST_CASE("flex_backward (interpreter): GQA/MQA, odd lengths, padded and unequal head dims, both dQ modes",
          "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  struct Shape {
    int hq, hkv, sq, sk, d, dv;
  };
  for (bool atomics : {false, true})
    for (Shape sh : {Shape{4, 1, 17, 17, 32, 0}, Shape{8, 2, 1, 29, 16, 0}, Shape{2, 2, 45, 19, 40, 24},
                     Shape{2, 1, 17, 19, 192, 0}, Shape{2, 2, 9, 13, 256, 96}}) {
      INFO("heads " << sh.hq << "/" << sh.hkv << " seqlen " << sh.sq << "x" << sh.sk << " d " << sh.d << "/"
                    << sh.dv << (atomics ? ", dQ by atomics" : ", dQ pass"));
      FlexCase c = small_case(sh.hq, sh.hkv, sh.sq, sh.sk, sh.d, sh.dv);
      FlexOptions o;
      o.mask = attention::causal(Align::BottomRight);
      o.atomics = atomics;
      require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({-1, 0, Align::BottomRight})}), c.dtype);
    }
  // Varlen: packed sequences of unequal lengths (one empty), causal bottom-right, GQA and a soft-cap lambda.
  FlexCase var = small_case(4, 2, 0, 0, 32);
  var.seqlens_q = {23, 0, 1, 40};
  var.seqlens_k = {31, 5, 17, 40};
  FlexOptions vo;
  vo.mask = attention::causal(Align::BottomRight);
  vo.score_mod = [](Tile sc, Tile, Tile, Tile, Tile) { return 4.f * tanh(sc / 4.f); };
  require_backward_matches(
      run_backward_case(be, var, vo,
                        {[](double x, int, int, int, int) { return 4.0 * std::tanh(x / 4.0); },
                         band_visible({-1, 0, Align::BottomRight})}),
      var.dtype);
  FlexCase f16 = small_case(2, 1, 33, 33, 64);
  f16.dtype = DType::f16;
  require_backward_matches(run_backward_case(be, f16, FlexOptions{}, {}), f16.dtype);
  // Token-major tensors [batch, seqlen, heads, d]: sequence strides of heads·d, which the kernels compile in,
  // beside the head-major ones above in the same process (q, k, v and out each with its own).
  for (bool atomics : {false, true}) {
    INFO("token-major" << (atomics ? ", dQ by atomics" : ", dQ pass"));
    FlexCase bshd = small_case(4, 2, 37, 53, 32, 24);
    bshd.token_major = true;
    FlexOptions o;
    o.mask = attention::causal(Align::BottomRight);
    o.atomics = atomics;
    require_backward_matches(run_backward_case(be, bshd, o, {{}, band_visible({-1, 0, Align::BottomRight})}),
                             bshd.dtype);
  }
}

TEST_CASE("flex_backward (interpreter): mask functions walk a block mask and its transpose", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  // Block-diagonal "documents" of 24 queries and 30 keys: most 16x16 tiles are empty; head 1 also sees the
  // first 5 keys (lists per head), and rows of queries past the last document's keys see none.
  attention::Mask mask;
  mask.fn = [](Tile, Tile h, Tile q, Tile kv) { return ((q / 24) == (kv / 30)) | ((h == 1) & (kv < 5)); };
  RefMods ref{{}, [](int, int h, int q, int kv, int, int) { return q / 24 == kv / 30 || (h == 1 && kv < 5); }};
  for (int block_n : {16, 32}) {
    INFO("blocks 16x" << block_n << (block_n == 16 ? "" : ": the dQ kernel's block mask is made at 32x16"));
    FlexCase c = small_case(4, 2, 70, 90, 32);
    c.block_n = block_n;
    const uint64_t backward_masks = block_n == 16 ? 1 : 2;
    auto uses = [] {
      auto st = attention::flex::block_mask_stats();
      return st.builds + st.cache_hits;
    };
    for (bool atomics : {false, true}) {
      INFO((atomics ? "dQ by atomics" : "dQ pass"));
      FlexOptions o;
      o.mask = mask;
      o.atomics = atomics;
      {
        INFO("the block mask built (or reused) by the call: forward and backward each take one");
        const uint64_t before = uses();
        require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
        CHECK(uses() - before == 1 + backward_masks);
      }
      {
        INFO("BlockMaskMode::Off: the function on every tile");
        FlexCase off = c;
        off.block_mask_mode = attention::BlockMaskMode::Off;
        const uint64_t before = uses();
        require_backward_matches(run_backward_case(be, off, o, ref), c.dtype);
        CHECK(uses() == before);
      }
      {
        INFO("a precomputed block mask");
        FlexOptions mk;
        mk.block_m = c.block_m;
        mk.block_n = c.block_n;
        mk.backend = be;
        attention::BlockMask bm = attention::create_block_mask(mask, c.shape, mk);
        FlexOptions pre = o;
        pre.block_mask = &bm;
        require_backward_matches(run_backward_case(be, c, pre, ref), c.dtype);
        // One assembled by hand without the statuses after its lists is refused, not read past its end.
        const size_t entries = size_t(bm.shared_batches ? 1 : bm.batch) * (bm.shared_heads ? 1 : bm.heads) *
                               bm.num_q_blocks * bm.num_k_blocks;
        bm.kv_blocks = Buffer(entries * 4, be);  // the lists alone
        const size_t bytes = size_t(2) * 4 * 90 * 32 * 4;  // ample for every tensor
        Buffer any(bytes, be), dq(bytes, be), dk(bytes, be), dv(bytes, be);
        pre.backend = be;
        pre.block_m = c.block_m;
        pre.block_n = c.block_n;
        CHECK_THROWS_WITH(attention::flex_backward(any, any, any, any, any, any, dq, dk, dv, c.shape, pre),
                          Contains("pass a block mask made by create_block_mask"));
      }
      {
        INFO("varlen: lists per sequence");
        FlexCase var = small_case(4, 2, 0, 0, 32);
        var.block_n = block_n;
        var.seqlens_q = {70, 0, 17, 49};
        var.seqlens_k = {90, 12, 0, 61};
        require_backward_matches(run_backward_case(be, var, o, ref), var.dtype);
        // A dense call's block mask does not fit a varlen call.
        FlexOptions mk;
        mk.block_m = var.block_m;
        mk.block_n = var.block_n;
        mk.backend = be;
        attention::BlockMask dense = attention::create_block_mask(mask, CaseLayout(var).s, mk);
        FlexOptions pre = o;
        pre.block_mask = &dense;
        CaseLayout lay(var);
        apply_case(pre, var, lay, be);
        const size_t bytes = size_t(lay.s.total_q + lay.s.total_k) * 4 * 32 * 4;  // ample for every tensor
        Buffer any(bytes, be), dq(bytes, be), dk(bytes, be), dv(bytes, be);
        CHECK_THROWS_WITH(attention::flex_backward(any, any, any, any, any, any, dq, dk, dv, lay.s, pre),
                          Contains("attention::flex_backward: the block mask was made for cu_seqlens at 0x0/0x0 "
                                   "(dense)"));
      }
    }
  }
}

TEST_CASE("flex_backward: two runs give bitwise the same gradients, unsupported inputs are named", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  FlexCase c = small_case(4, 2, 33, 33, 32);
  check_backward_deterministic(be, c, 2);
  FlexOptions o;
  o.backend = be;
  const auto &s = c.shape;
  const size_t nq = size_t(2) * 4 * 33 * 32;
  auto bq = upload_as(random_values(nq, c.dtype), c.dtype, be);
  Buffer out(nq * 2, be), lse(size_t(2) * 4 * 33 * 4, be), dq(nq * 2, be), dk(nq * 2, be), dv(nq * 2, be);
  const Buffer &bk = bq, &bv = bq, &bdo = bq;
  Buffer empty;
  attention::PagedKVCache cache;
  FlexOptions paged = o;
  paged.kv_cache = &cache;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, paged),
                    Contains("attention::flex_backward: a paged KV cache"));
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, empty, dk, dv, s, o),
                    Contains("attention::flex_backward: pointer 'dq' is null"));
  Buffer small_dk(16, be);
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, small_dk, dv, s, o),
                    Contains("attention::flex_backward: 'dk' holds 16 bytes"));
  // Gradients written over an input or over each other.
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, out, dv, s, o),
                    Contains("attention::flex_backward: 'dk' and 'out' start at the same address"));
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dq, dv, s, o),
                    Contains("attention::flex_backward: 'dq' and 'dk' start at the same address"));
  // Block masks made for another call.
  FlexOptions masked = o;
  masked.mask.fn = [](Tile, Tile, Tile q, Tile kv) { return (q / 8) == (kv / 8); };
  auto made_for = [&](const attention::FlexShape &shape, const FlexOptions &mk) {
    return attention::create_block_mask(masked.mask, shape, mk);
  };
  FlexOptions mk = o;
  mk.block_m = 32;  // the call's blocks are the default 64x64
  attention::BlockMask other_blocks = made_for(s, mk);
  masked.block_mask = &other_blocks;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, masked),
                    Contains("attention::flex_backward: the block mask was made for batch 2, heads 4, 2x1 blocks of "
                             "32x64 (seqlen 33/33); this call needs batch 2, heads 4, 1x1 blocks of 64x64 (seqlen "
                             "33/33)"));
  attention::FlexShape shorter = s;  // the same block counts
  shorter.seqlen_q = shorter.seqlen_k = 20;
  attention::BlockMask other_lengths = made_for(shorter, o);
  masked.block_mask = &other_lengths;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, masked),
                    Contains("(seqlen 20/20); this call needs batch 2, heads 4, 1x1 blocks of 64x64 (seqlen 33/33)"));
  attention::FlexShape none = s;
  none.batch = 0;
  attention::BlockMask no_lists = made_for(none, o);
  masked.block_mask = &no_lists;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, masked),
                    Contains("the block mask was made for batch 0"));
  attention::BlockMask same = made_for(s, o);
  FlexOptions banded = masked;
  banded.block_mask = &same;
  banded.mask.band = attention::Band{-1, 0, Align::TopLeft};
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, banded),
                    Contains("the block mask was made with band none, this call's mask has band [-1, 0] top-left"));
  // Varlen without total_k, which sizes k and v.
  Buffer cu(3 * 4, be);
  FlexOptions varlen = o;
  varlen.cu_seqlens_q = varlen.cu_seqlens_k = DevicePtr{cu.address(), cu.bytes()};
  attention::FlexShape no_total_k = s;
  no_total_k.total_q = 40;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, no_total_k, varlen),
                    Contains("varlen needs FlexShape::total_q and total_k (the last cu_seqlens entries); got 40 and 0"));
  // A learnable capture whose sizes are both unknown: its fixed-point sums need scratch of the gradient's size.
  std::vector<float> table_host(64, 0.5f);
  Buffer table(64 * 4, be), table_grad(64 * 4, be);
  table.upload(table_host);
  FlexOptions learnable = o;
  Captured tab = capture(DevicePtr{table.address(), 0}, DType::f32, DevicePtr{table_grad.address(), 0});
  learnable.score_mod = [tab](Tile sc, Tile, Tile, Tile q, Tile kv) { return sc + load(tab() + ((q - kv) & 63)); };
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, learnable),
                    Contains("attention::flex_backward: a learnable capture and its gradient buffer (at 0x") &&
                        Contains("were both given as DevicePtrs without their sizes"));
  // Gradient buffers that are not memory of their own, in both modes.
  for (bool atomics : {false, true}) {
    INFO((atomics ? "f32 atomics" : "fixed point"));
    learnable.atomics = atomics;
    tab.set(table);
    tab.set_grad(DevicePtr{table.address(), table.bytes()});
    CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, learnable),
                      Contains("attention::flex_backward: a learnable capture's gradient buffer is the captured "
                               "buffer itself"));
    tab.set_grad(DevicePtr{dq.address(), 64 * 4});
    CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, learnable),
                      Contains("attention::flex_backward: a learnable capture's gradient buffer starts at the "
                               "address of 'dq'"));
    tab.set_grad(DevicePtr{});
    CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, learnable),
                      Contains("attention::flex_backward: a learnable capture (at 0x") &&
                          Contains("has a null gradient buffer"));
  }
  // A table larger than its gradient buffer is refused where it is set.
  tab.set_grad(table_grad);
  Buffer larger(128 * 4, be);
  CHECK_THROWS_WITH(tab.set(larger), Contains("Captured::set: the buffer holds 512 bytes, more than the 256 of its "
                                              "gradient buffer"));
  attention::FlexShape bad = s;
  bad.heads_kv = 3;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, bad, o),
                    Contains("attention::flex_backward"));
}

TEST_CASE("flex_backward: a NaN or an infinity in a capture's gradient terms reaches its gradient in both modes",
          "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  FlexCase c = small_case(2, 2, 24, 24, 32);
  const auto &s = c.shape;
  const size_t n = size_t(2) * 2 * 24 * 32;
  std::vector<float> dout_host = random_values(n, c.dtype);
  auto bq = upload_as(random_values(n, c.dtype), c.dtype, be), bk = upload_as(random_values(n, c.dtype), c.dtype, be);
  auto bv = upload_as(random_values(n, c.dtype), c.dtype, be);
  Buffer out(n * 2, be), lse(size_t(2) * 2 * 24 * 4, be), dq(n * 2, be), dk(n * 2, be), dv(n * 2, be);
  Buffer table(2 * 64 * 4, be), grad(2 * 64 * 4, be);
  table.upload(random_values(2 * 64, DType::f32));
  Captured tab = capture(table, DType::f32, grad);
  FlexOptions o;
  o.backend = be;
  o.score_mod = [tab](Tile sc, Tile, Tile h, Tile q, Tile kv) { return sc + load(tab() + h * 64 + ((q - kv) & 63)); };
  attention::flex_forward(bq, bk, bv, out, lse, s, o);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Row 5 of (batch 0, head 1): its dP, so every dZ of that row, is NaN; with +inf in dO its dZ are ±inf or NaN.
  for (float poison : {nan, inf}) {
    std::vector<std::vector<float>> got;
    for (bool atomics : {false, true}) {
      INFO((atomics ? "f32 atomics" : "fixed point") << ", dO holds " << poison);
      std::vector<float> d = dout_host;
      d[(size_t(0 * 2 + 1) * 24 + 5) * 32 + 3] = poison;
      auto bdo = upload_as(d, c.dtype, be);
      grad.upload(std::vector<float>(2 * 64, 0.f));
      o.atomics = atomics;
      attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, o);
      got.push_back(grad.download_as<float>(2 * 64));
      int finite = 0;
      for (size_t e = 0; e < 64; ++e) finite += std::isfinite(got.back()[e]);  // head 0: untouched by row 5
      CHECK(finite == 64);
      int poisoned = 0;
      for (size_t e = 64; e < 128; ++e) poisoned += !std::isfinite(got.back()[e]);
      CHECK(poisoned == 24);  // the 24 distances row 5 sees, (5 − j) & 63
    }
    for (size_t e = 0; e < 128; ++e) {
      INFO("entry " << e << ": fixed point " << got[0][e] << ", atomics " << got[1][e]);
      CHECK(std::isnan(got[0][e]) == std::isnan(got[1][e]));
      CHECK(std::isinf(got[0][e]) == std::isinf(got[1][e]));
    }
  }
}

TEST_CASE("flex_backward: keys that no query sees get zero dk and dv", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  for (int heads_q : {0, 4}) {
    INFO("heads_q " << heads_q);
    attention::FlexShape s{.batch = 2, .heads_q = heads_q, .heads_kv = 2, .seqlen_q = heads_q ? 0 : 5,
                           .seqlen_k = 20, .head_dim_qk = 32};
    const size_t nk = size_t(2) * 2 * 20 * 32;
    auto bk = upload_as(random_values(nk, DType::bf16), DType::bf16, be);
    Buffer q, out, dout, lse, dq;  // empty: no query row is addressed
    Buffer dk(nk * 2, be), dv(nk * 2, be);
    for (Buffer *b : {&dk, &dv}) b->fill_bytes(0xff);  // NaN
    FlexOptions o;
    o.backend = be;
    attention::flex_backward(q, bk, bk, out, lse, dout, dq, dk, dv, s, o);
    for (Buffer *b : {&dk, &dv})
      for (float x : download_as_float(*b, nk, DType::bf16)) REQUIRE(x == 0.f);
  }
}

TEST_CASE("flex_backward's three kernels compile to PTX that ptxas accepts for sm_80 and sm_90a", "[flex][backward][ptx]") {
  attention::FlexShape s;
  s.batch = 2;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.seqlen_q = s.seqlen_k = 1024;
  s.head_dim_qk = 64;
  FlexOptions o;
  o.mask = attention::causal(Align::BottomRight);
  // A soft-cap and a learnable bias table: the dK/dV kernel then scatters the table's gradient.
  Captured table = capture(DevicePtr{256, 0}, DType::f32, DevicePtr{1024, 0});
  o.score_mod = [table](Tile sc, Tile, Tile, Tile q, Tile kv) {
    return 20.f * tanh(sc / 20.f) + load(table() + ((q - kv) & 63));
  };
  attention::Mask causal_band = o.mask, causal_fn;
  causal_fn.fn = [](Tile, Tile, Tile q, Tile kv) { return kv <= q; };
  for (bool atomics : {false, true})
  for (std::string arch : {"sm_80", "sm_90a"}) {
    o.arch = arch;
    o.atomics = atomics;
    // The band's closed-form walks (sm_80), and a mask function's block-mask walks (sm_90a, both dQ modes).
    o.mask = arch == "sm_90a" ? causal_fn : causal_band;
    const std::string ptx = attention::flex_backward_ptx(s, o);
    // One module per kernel, each starting with the PTX header comment.
    std::vector<std::string> modules;
    for (size_t at = ptx.find("//\n// Generated"); at != std::string::npos;) {
      size_t next = ptx.find("//\n// Generated", at + 1);
      modules.push_back(ptx.substr(at, next == std::string::npos ? std::string::npos : next - at));
      at = next;
    }
    REQUIRE(modules.size() == 3);
    const char *names[] = {"flex_attention_bwd_delta", "flex_attention_bwd_dkdv", "flex_attention_bwd_dq"};
    for (size_t i = 0; i < 3; ++i) {
      INFO(arch << " " << names[i] << (atomics ? " dQ by atomics" : " dQ pass"));
      REQUIRE(contains(modules[i], std::string(".entry ") + names[i]));
      // The products run on tensor cores (mma.sync, or wgmma where a dot's shape fits it): dK/dV's, and dQ's
      // in its own pass (with atomics the dQ kernel only converts the accumulator).
      const bool tensor_cores = contains(modules[i], "mma.sync.aligned.m16n8k16") || contains(modules[i], "wgmma.mma_async");
      REQUIRE(tensor_cores == (i == 1 || (i == 2 && !atomics)));
      // The table's gradient is added in the dK/dV kernel only: in 64-bit fixed point, or with atomics in f32
      // (as dQ then).
      REQUIRE(contains(modules[i], "atom.global.add.f32") == (i == 1 && atomics));
      REQUIRE(contains(modules[i], "atom.global.add.u64") == (i == 1 && !atomics));
      if (i == 1) {
        // The kernel's tiles are transposed (a key per row): dV += Pᵀ·dO and dK += dSᵀ·Q take Pᵀ and dSᵀ from
        // registers as wgmma's A on sm_90a. With atomics the tiles keep a query per row for dQ = dS·K, and dV
        // and dK read Pᵀ and dSᵀ from shared memory as stored (a wgmma with transpose-a 1).
        if (arch == "sm_90a") {
          CHECK(contains(modules[i], "}, {%r"));
          CHECK(contains(modules[i], "p, 1, 1, 1, 1;") == atomics);
        }
        // sm_90a adds dQ's f32 pairs with one vector reduction each.
        CHECK(contains(modules[i], "red.global.add.v2.f32") == (arch == "sm_90a" && atomics));
      }
      auto [rc, log] = ptxas_v(modules[i], arch, names[i]);
      INFO("ptxas says:\n" << log);
      REQUIRE(rc == 0);
    }
  }
}

TEST_CASE("flex_backward: a score_mod with control flow is rejected by name, a non-default scale and unequal "
          "block sizes", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  FlexCase c = small_case(2, 1, 33, 47, 32);
  FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile h, Tile, Tile) {
    Tile r = s;
    if_(h >= 0, [&] { r = s * 2.f; });
    return r;
  };
  CHECK_THROWS_WITH(run_backward_case(be, c, o, {}), Contains("vjp: cannot differentiate if") && Contains("control flow"));
  // softmax_scale 0.3 (not 1/sqrt(d)), BLOCK_M 32 × BLOCK_N 16, a bottom-right window over unequal lengths.
  c.softmax_scale = 0.3f;
  c.block_m = 32;
  c.block_n = 16;
  FlexOptions w;
  w.mask = attention::sliding_window(9, 2, Align::BottomRight);
  require_backward_matches(run_backward_case(be, c, w, {{}, band_visible({9, 2, Align::BottomRight})}), c.dtype);
}

TEST_CASE("flex_backward with 128-key blocks on two warpgroups: both kernels run on wgmma, K and V stay in shared "
          "memory", "[flex][backward][ptx]") {
  // d128, BLOCK_M 64, BLOCK_N 128, 8 warps: the dK/dV kernel's 128 keys split between the warpgroups, and the
  // dQ kernel (the swapped tiling) owns 128 queries stepping 64 keys, so every dot has whole warpgroups on M.
  // K and V of the key block (64 KB, past the 48 KB of static shared memory) are staged once in the dynamic
  // buffer and read by descriptor: no ldmatrix restaging them each iteration.
  attention::FlexShape s;
  s.batch = 2;
  s.heads_q = s.heads_kv = 4;
  s.seqlen_q = s.seqlen_k = 1024;
  s.head_dim_qk = 128;
  FlexOptions o;
  o.arch = "sm_90a";
  o.block_m = 64;
  o.block_n = 128;
  o.num_warps = 8;
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "full"));
    o.mask = causal ? attention::causal(Align::TopLeft) : attention::Mask{};
    const std::string ptx = attention::flex_backward_ptx(s, o);
    const size_t dkdv = ptx.find(".entry flex_attention_bwd_dkdv"), dq = ptx.find(".entry flex_attention_bwd_dq");
    REQUIRE(dkdv != std::string::npos);
    REQUIRE(dq != std::string::npos);
    REQUIRE(dkdv < dq);
    const std::string dkdv_ptx = ptx.substr(dkdv, dq - dkdv), dq_ptx = ptx.substr(dq);
    for (const std::string *m : {&dkdv_ptx, &dq_ptx}) {
      CHECK(contains(*m, "wgmma.mma_async"));
      CHECK_FALSE(contains(*m, "mma.sync.aligned"));
    }
    CHECK_FALSE(contains(dkdv_ptx, "ldmatrix"));
    const size_t begin = ptx.rfind("//\n// Generated", dkdv), end = ptx.find("//\n// Generated", dkdv);
    auto [rc, log] = ptxas_v(ptx.substr(begin, end - begin), "sm_90a", "flex_attention_bwd_dkdv");
    INFO("ptxas says:\n" << log);
    REQUIRE(rc == 0);
  }
}

TEST_CASE("flex_backward: soft masks of −1e10 and −1e30 give the forward's gradients where rows see a key, finite ones "
          "where a whole row is soft-masked",
          "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  const FlexCase c = small_case(2, 2, 40, 40, 32);
  for (double soft : {-1e10, -1e30}) {
    INFO("soft mask " << soft);
    {
      INFO("a causal soft mask: every row keeps its keys up to the diagonal");
      FlexOptions o;
      const float f = float(soft);
      o.score_mod = [f](Tile s, Tile, Tile, Tile q, Tile kv) { return where(kv <= q, s, full_like(s, f)); };
      RefMods ref{[soft](double x, int, int, int q, int kv) { return kv <= q ? x : soft; }, {}};
      require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
    }
    {
      // Rows 0–19 see only the soft mask: their lse (−1e30 + ln 40) rounds to −1e30 in f32, so the backward
      // cannot tell that 40 keys tie (it takes p = 1 for each; flex_attention.h). dq and dk do not depend on
      // those rows (the mod's derivative is 0 there); dv must stay finite.
      INFO("whole rows soft-masked");
      FlexOptions o;
      const float f = float(soft);
      o.score_mod = [f](Tile s, Tile, Tile, Tile q, Tile) { return where(q >= 20, s, full_like(s, f)); };
      RefMods ref{[soft](double x, int, int, int q, int) { return q >= 20 ? x : soft; }, {}};
      const BackwardResult r = run_backward_case(be, c, o, ref);
      for (float x : r.dv) REQUIRE(std::isfinite(x));
      CHECK(gradient_error(r.dq, r.ref_dq, r.mag_dq, backward_tolerance(c.dtype)) <= backward_tolerance(c.dtype));
      CHECK(gradient_error(r.dk, r.ref_dk, r.mag_dk, backward_tolerance(c.dtype)) <= backward_tolerance(c.dtype));
    }
  }
}
