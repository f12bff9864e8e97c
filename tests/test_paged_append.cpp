// paged_kv_append on the interpreter: every token's K/V lands in its slot and nothing else changes (the pages
// start as fresh random values, and every element is compared bit for bit), skipped slots write nothing,
// strided inputs and caches, and the cache validation shared with the decode ops (kernels/paged/paged_cache.h).
// Also checks the test model itself (tools/paged_check.h): its shuffled tables and gather.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "kernels/paged/append.h"
#include "paged_reference.h"
#include "test_codegen_util.h"
#include "tilejit/error.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {

constexpr Backend kBe = Backend::Interpreter;

}  // namespace

TEST_CASE("paged test model: shuffled pages, some unused, gather through the table", "[paged][cpu]") {
  for (int P : {1, 16, 64}) {
    HostCacheSpec s = paged_spec({0, 1, P - 1, P, P + 1, 200}, P, 2, 16, PagedStrides::Padded, 32);
    s.spare_pages = 5;
    // A fixed seed: the shuffle of a few pages may come out sorted by chance, which this test must not see.
    std::mt19937_64 seeded(12345 + P);
    tools::HostPagedCache h = tools::make_host_cache(s, seeded);
    INFO("page size " << P);
    std::set<int> used;
    int needed = 0;
    for (int b = 0; b < h.batch; ++b) {
      int pages = (h.seq_lens[size_t(b)] + P - 1) / P;
      needed += pages;
      for (int p = 0; p < h.max_pages_per_seq; ++p) {
        int page = h.block_table[size_t(b * h.block_table_stride + p)];
        if (p < pages) {
          REQUIRE((page >= 0 && page < h.num_pages));
          REQUIRE(used.insert(page).second);  // no page shared
        } else {
          REQUIRE((page < 0 || page >= h.num_pages));  // past the sequence: unusable
        }
      }
    }
    REQUIRE(int(used.size()) == needed);
    REQUIRE(h.num_pages == needed + 5);
    // Not the identity placement: the sequences' pages, in order, are not the physical pages in order.
    std::vector<int> in_order;
    for (int b = 0; b < h.batch; ++b)
      for (int p = 0; p < (h.seq_lens[size_t(b)] + P - 1) / P; ++p)
        in_order.push_back(h.block_table[size_t(b * h.block_table_stride + p)]);
    REQUIRE_FALSE(std::is_sorted(in_order.begin(), in_order.end()));
    // gather_k reads slot(b, j)'s element for each head.
    std::vector<float> k = h.gather_k(5), v = h.gather_v(5);
    for (int j : {0, P - 1, P, 199})
      for (int hh = 0; hh < 2; ++hh) {
        if (j < 0) continue;
        int page = h.block_table[size_t(5 * h.block_table_stride + j / P)];
        int64_t off = page * h.page_stride + (j % P) * h.token_stride + hh * h.head_stride;
        REQUIRE(k[(size_t(j) * 2 + hh) * 16] == h.value(h.k_bits[size_t(off)]));
        REQUIRE(v[(size_t(j) * 2 + hh) * 32 + 31] == h.value(h.v_bits[size_t(off) + 31]));
      }
    // Random values everywhere (never a zero-filled page).
    REQUIRE(std::count_if(h.k_bits.begin(), h.k_bits.end(), [&](uint16_t x) { return h.value(x) == 0.f; }) <
            int64_t(h.k_bits.size() / 100 + 1));
  }
}

TEST_CASE("paged_kv_append: values land in their slots, skipped and other slots untouched", "[paged][cpu]") {
  for (int P : {1, 16, 64})
    for (PagedStrides st : {PagedStrides::Contiguous, PagedStrides::Padded, PagedStrides::HeadsMajor}) {
      INFO("page size " << P << ", strides " << int(st));
      // heads_kv 3 (not a power of two: masked head lanes), head dims 32 / 16 (K and V differ).
      AppendFixture f = garbage_cache(kBe, paged_spec({0, 1, P - 1, P, P + 1, 70}, P, 3, 32, st, 16));
      append_tokens(f, tools::append_batch(f.d.host, {}, {}, 7, rng()));
      require_pages(f);
    }
}

TEST_CASE("paged_kv_append: f16, head dims not powers of two, one head", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({5, 33, 0}, 16, 1, 48, PagedStrides::Contiguous, 80, DType::f16));
  append_tokens(f, tools::append_batch(f.d.host, {}, {}, 2, rng()));
  require_pages(f);
  // Many heads: several programs per token.
  AppendFixture g = garbage_cache(kBe, paged_spec({9, 17}, 8, 40, 256, PagedStrides::Padded, 256));
  append_tokens(g, tools::append_batch(g.d.host, {}, {}, 1, rng()));
  require_pages(g);
}

TEST_CASE("paged_kv_append: a prompt then decode steps, one token per sequence each", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({20, 3, 17, 1}, 16, 2, 32, PagedStrides::Contiguous, 32));
  // The prompt: all but the last 3 tokens of each sequence.
  std::vector<int> upto;
  for (int n : f.d.host.seq_lens) upto.push_back(std::max(0, n - 3));
  append_tokens(f, tools::append_batch(f.d.host, {}, upto, 0, rng()));
  require_pages(f, upto);
  // Then one token per sequence per step, with a padded slot each step.
  for (int step = 0; step < 3; ++step) {
    std::vector<int> from = upto;
    for (size_t b = 0; b < upto.size(); ++b) upto[b] = std::min(upto[b] + 1, f.d.host.seq_lens[b]);
    append_tokens(f, tools::append_batch(f.d.host, from, upto, 1, rng()));
    require_pages(f, upto);
  }
  require_pages(f);
}

TEST_CASE("paged_kv_append: strided k_new / v_new", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({30, 7}, 16, 2, 32, PagedStrides::Padded, 32));
  tools::AppendBatch a = tools::append_batch(f.d.host, {}, {}, 4, rng());
  // Rows of 2 heads at head stride 40 and token stride 2·40 + 24, gaps filled with values that must not move.
  const int H = 2, D = 32;
  const int64_t hs = 40, ts = H * hs + 24;
  std::vector<uint16_t> k = tools::random_bits(size_t(a.tokens) * ts, DType::bf16, rng()),
                        v = tools::random_bits(size_t(a.tokens) * ts, DType::bf16, rng());
  for (int t = 0; t < a.tokens; ++t)
    for (int h = 0; h < H; ++h) {
      std::copy_n(&a.k_bits[size_t((t * H + h) * D)], D, &k[size_t(t * ts + h * hs)]);
      std::copy_n(&a.v_bits[size_t((t * H + h) * D)], D, &v[size_t(t * ts + h * hs)]);
    }
  Buffer kb = upload_bits(k, kBe), vb = upload_bits(v, kBe), slots = upload_i32(a.slots, kBe);
  attention::paged_kv_append(f.d.cache, device_ptr(kb), device_ptr(vb), device_ptr(slots), a.tokens,
                             {.token_stride = ts, .head_stride = hs, .backend = kBe});
  require_pages(f);
}

TEST_CASE("paged_kv_append: zero tokens and all-skipped tokens change nothing", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({10, 40}, 16, 2, 32, PagedStrides::Contiguous, 32));
  tools::AppendBatch a = tools::append_batch(f.d.host, {}, {}, 0, rng());
  Buffer k = upload_bits(a.k_bits, kBe), v = upload_bits(a.v_bits, kBe);
  std::vector<int32_t> skip(size_t(a.tokens), -1);
  Buffer slots = upload_i32(skip, kBe);
  attention::paged_kv_append(f.d.cache, device_ptr(k), device_ptr(v), device_ptr(slots), 0, {.backend = kBe});
  require_pages(f, {0, 0});
  attention::paged_kv_append(f.d.cache, device_ptr(k), device_ptr(v), device_ptr(slots), a.tokens, {.backend = kBe});
  require_pages(f, {0, 0});
}

TEST_CASE("paged_kv_append: a slot past the pages is an out-of-bounds access on the interpreter", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({10}, 16, 1, 16, PagedStrides::Contiguous, 16));
  std::vector<uint16_t> bits(16, 0x3f80);
  Buffer k = upload_bits(bits, kBe), v = upload_bits(bits, kBe);
  Buffer slots = upload_i32({f.d.host.num_pages * 16}, kBe);
  REQUIRE_THROWS_AS(attention::paged_kv_append(f.d.cache, device_ptr(k), device_ptr(v), device_ptr(slots), 1,
                                               {.backend = kBe}),
                    InterpError);
}

TEST_CASE("paged cache validation: each bad field named with its value", "[paged][cpu]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({10, 20}, 16, 2, 32, PagedStrides::Contiguous, 32));
  tools::AppendBatch a = tools::append_batch(f.d.host, {}, {}, 0, rng());
  Buffer k = upload_bits(a.k_bits, kBe), v = upload_bits(a.v_bits, kBe), slots = upload_i32(a.slots, kBe);
  auto run = [&](const attention::PagedKVCache &c, int tokens = -2, DevicePtr kp = {},
                 attention::AppendOptions o = {}) {
    o.backend = kBe;
    attention::paged_kv_append(c, kp.address ? kp : device_ptr(k), device_ptr(v), device_ptr(slots),
                               tokens == -2 ? a.tokens : tokens, o);
  };
  auto bad = [&](auto edit, const std::string &what) {
    attention::PagedKVCache c = f.d.cache;
    edit(c);
    require_trace_error([&] { run(c); }, {"attention::paged_kv_append: ", what});
  };
  for (int p : {3, 0, 512, -16, 24})
    bad([p](auto &c) { c.page_size = p; }, fmt::format("page_size {}", p));
  for (int d : {8, 300, 0}) bad([d](auto &c) { c.head_dim = d; }, fmt::format("head_dim {}", d));
  bad([](auto &c) { c.head_dim_v = 12; }, "head_dim_v 12");
  bad([](auto &c) { c.dtype = DType::f32; }, "dtype f32");
  bad([](auto &c) { c.heads_kv = 0; }, "heads_kv 0");
  bad([](auto &c) { c.num_pages = -1; }, "num_pages -1");
  bad([](auto &c) { c.max_pages_per_seq = -2; }, "max_pages_per_seq -2");
  bad([](auto &c) { c.page_stride = -5; }, "page_stride -5");
  bad([](auto &c) { c.token_stride = -1; }, "token_stride -1");
  bad([](auto &c) { c.head_stride = -3; }, "head_stride -3");
  bad([](auto &c) { c.block_table_stride = -4; }, "block_table_stride -4");
  bad([](auto &c) { c.block_table_stride = 1; }, "block_table_stride 1");
  bad([](auto &c) { c.k_pages = {}; }, "k_pages is null");
  bad([](auto &c) { c.v_pages = {}; }, "v_pages is null");
  // Overlapping layouts: two heads in 16 elements of 32 values each; a page shorter than its tokens.
  // (The contiguous strides here: page 1024, token 64, head 32.)
  auto strides = [](int64_t page, int64_t token, int64_t head) {
    return [=](attention::PagedKVCache &c) {
      c.page_stride = page;
      c.token_stride = token;
      c.head_stride = head;
    };
  };
  bad(strides(1024, 48, 32), "token_stride 48 makes K overlap");
  bad(strides(1024, 64, 16), "head_stride 16 makes K overlap");
  bad(strides(960, 64, 32), "page_stride 960 makes K overlap");
  bad(strides(0, 48, 0), "give all three strides");
  // A token stride so large that the pages' extent passes 2^62 elements: named with every stride.
  bad(strides(int64_t(1) << 61, int64_t(1) << 56, 32),
      "the K pages would span more than 2^62 elements (page_stride 2305843009213693952, token_stride 72057594037927936");
  // Pages smaller than the layout addresses.
  bad([](auto &c) { c.k_pages.bytes = 100; }, "k_pages holds 100 bytes");
  bad([](auto &c) { c.num_pages += 1; }, "k_pages holds");
  bad([](auto &c) { c.v_pages.bytes -= 2; }, "v_pages holds");
  // The inputs.
  require_trace_error([&] { run(f.d.cache, -1); }, {"tokens -1"});
  require_trace_error([&] {
    attention::paged_kv_append(f.d.cache, DevicePtr{}, device_ptr(v), device_ptr(slots), 1, {.backend = kBe});
  }, {"'k_new' is null"});
  require_trace_error([&] {
    attention::paged_kv_append(f.d.cache, device_ptr(k), device_ptr(v), DevicePtr{}, 1, {.backend = kBe});
  }, {"'slot_mapping' is null"});
  require_trace_error([&] { run(f.d.cache, -2, {}, {.token_stride = -1}); }, {"token_stride -1"});
  require_trace_error([&] { run(f.d.cache, a.tokens + 1); }, {"'k_new' holds", "tokens"});
  // Nothing was written by the rejected calls.
  require_pages(f, {0, 0});
  // A cache that passes: the same call appends.
  run(f.d.cache);
  require_pages(f);
}

// The reference itself, against the flex kernel (checked against its own float64 reference elsewhere) on each
// sequence's K/V gathered into a dense tensor: flex numbers queries from 0, so its mods add the position
// offset L − seqlen_q (mod_seqlen_k() − mod_seqlen_q()) that the paged reference applies.
TEST_CASE("paged reference: equals flex_forward on the gathered K/V at shifted positions", "[paged][cpu]") {
  const int Hq = 4, Hkv = 2, D = 32, DV = 16, sq = 3;
  DeviceCache d = make_device_cache(kBe, paged_spec({3, 16, 17, 90}, 16, Hkv, D, PagedStrides::HeadsMajor, DV));
  tools::QueryLayout l = tools::decode_layout(d.host.batch, sq, Hq, D, DV);
  std::vector<float> q = random_values(l.q_elements, DType::bf16);
  const double scale = 1.0 / std::sqrt(double(D));
  RefMods ref{[](double s, int, int, int qp, int kv) { return s - 0.05 * std::abs(qp - kv); },
              [](int, int h, int qp, int kv, int, int) { return kv <= qp && (kv + h) % 3 != 0; }};
  tools::PagedRef want = tools::paged_reference(d.host, q, l, Hq, scale, ref);
  attention::FlexOptions opt;
  opt.score_mod = [](Tile s, Tile, Tile, Tile qi, Tile kv) {
    Tile pos = qi + (attention::mod_seqlen_k() - attention::mod_seqlen_q());
    return s - 0.05f * tilejit::abs(pos - kv).to(DType::f32);
  };
  opt.mask = attention::and_masks(attention::causal(attention::Align::BottomRight),
                                  attention::Mask([](Tile, Tile h, Tile, Tile kv) { return (kv + h) % 3 != 0; }));
  opt.backend = kBe;
  opt.block_m = opt.block_n = 16;
  for (int b = 0; b < d.host.batch; ++b) {
    const int L = d.host.seq_lens[size_t(b)];
    INFO("sequence " << b << " of length " << L);
    // flex's dense layouts: q [1, Hq, sq, D], k / v [1, Hkv, L, D(V)], out [1, Hq, sq, DV].
    std::vector<float> qd(size_t(Hq) * sq * D), kd(size_t(Hkv) * L * D), vd(size_t(Hkv) * L * DV);
    std::vector<float> gk = d.host.gather_k(b), gv = d.host.gather_v(b);
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < sq; ++i)
        std::copy_n(&q[size_t(l.q_base(b, h) + i * l.q_row_stride)], D, &qd[(size_t(h) * sq + i) * D]);
    for (int h = 0; h < Hkv; ++h)
      for (int j = 0; j < L; ++j) {
        std::copy_n(&gk[(size_t(j) * Hkv + h) * D], D, &kd[(size_t(h) * L + j) * D]);
        std::copy_n(&gv[(size_t(j) * Hkv + h) * DV], DV, &vd[(size_t(h) * L + j) * DV]);
      }
    Buffer bq = upload_as(qd, DType::bf16, kBe), bk = upload_as(kd, DType::bf16, kBe);
    Buffer bv = upload_as(vd, DType::bf16, kBe);
    Buffer out(size_t(Hq) * sq * DV * 2, kBe), lse(size_t(Hq) * sq * 4, kBe);
    out.fill_bytes(0xff);
    lse.fill_bytes(0xff);
    attention::FlexShape s{.batch = 1, .heads_q = Hq, .heads_kv = Hkv, .seqlen_q = sq, .seqlen_k = L,
                           .head_dim_qk = D, .head_dim_v = DV};
    attention::flex_forward(bq, bk, bv, out, lse, s, opt);
    FlexResult r;
    r.out = download_as_float(out, size_t(Hq) * sq * DV, DType::bf16);
    r.lse = lse.download_as<float>(size_t(Hq) * sq);
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < sq; ++i) {
        r.ref_lse.push_back(want.lse[size_t(l.lse_base(b, h) + i * l.lse_row_stride)]);
        for (int e = 0; e < DV; ++e) r.ref_out.push_back(want.out[size_t(l.out_base(b, h) + i * l.out_row_stride + e)]);
      }
    require_matches(r, DType::bf16);
  }
}

TEST_CASE("paged_kv_append's kernel compiles to PTX that ptxas accepts, with vector accesses", "[paged][ptx]") {
  AppendFixture f = garbage_cache(kBe, paged_spec({100, 7}, 16, 8, 128, PagedStrides::Contiguous));
  for (const char *arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    std::string ptx = attention::paged::append_ptx(f.d.cache, arch);
    REQUIRE(ptx.find(".entry paged_kv_append") != std::string::npos);
    // Each thread moves several contiguous elements of a head row per access (the head dim contiguous, the
    // strides divisible by 16), not one element at a time.
    auto lines_with = [&](const char *what) {
      auto has = [&](const std::string &l) { return l.find(what) != std::string::npos; };
      return codegen::testing::count_lines(ptx, has);
    };
    REQUIRE(lines_with("ld.global.v") > 0);
    REQUIRE(lines_with("st.global.v") > 0);
    REQUIRE(ptx.find("st.global.u16") == std::string::npos);
    REQUIRE(ptx.find("st.global.b16") == std::string::npos);
    auto file = codegen::testing::dump_ptx(ptx, std::string("paged_kv_append_") + arch);
    auto [rc, log] = codegen::testing::run_ptxas(file, arch);
    INFO("ptxas: " << log);
    REQUIRE(rc == 0);
  }
}
