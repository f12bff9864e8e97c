// The C ABI's paged KV cache and decode entries (tilejit_paged_kv_append, tilejit_decode_plan_*) on the CPU
// interpreter (TILEJIT_INTERPRET=1: the raw pointers are host memory): a cache with shuffled pages, the new
// tokens appended through the C ABI, then a planned decode step with each built-in variant, against a float64
// reference on the same logical K/V; and the argument errors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "flex_reference.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/c_api.h"
#include "tilejit/flex_variants.h"
#include "tilejit/numerics.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {

void *addr(const Buffer &b) { return reinterpret_cast<void *>(uintptr_t(b.address())); }

uint16_t to_bits(float x, DType dt) { return dt == DType::bf16 ? float_to_bf16(x) : float_to_f16(x); }
float from_bits(uint16_t x, DType dt) { return dt == DType::bf16 ? bf16_to_float(x) : f16_to_float(x); }
uint16_t nan_bits(DType dt) { return dt == DType::bf16 ? 0x7fc0 : 0x7e00; }

struct DecodeCase {
  int heads_q = 4, heads_kv = 2, head_dim = 32, page_size = 16, seqlen_q = 1;
  std::vector<int> lens{37, 70};  // tokens per sequence, the new ones included; batch = lens.size()
  DType dtype = DType::bf16;
  int64_t token_pad = 0;  // elements between a token's last head and the next token (0: contiguous pages)
  float softmax_scale = 0.f;
  bool want_lse = true;
  int num_splits = 0;
  tilejit_flex_variant variant{};
  DecodeCase() { tilejit_flex_variant_init(&variant); }
};

/// A paged cache on the interpreter: physical pages in a shuffled order, every element no sequence owns
/// (unused pages, slots past a sequence's end, the gaps of a padded layout) NaN, block table entries past a
/// sequence's last page an invalid page index, so a kernel reading anything it should not poisons its
/// result or trips the interpreter's bounds check.
struct PagedCache {
  tilejit_paged_kv kv{};
  Buffer k, v, table, lens;
  std::vector<int32_t> pages;  // block table [batch, max_pages_per_seq]
  int64_t page_stride = 0, token_stride = 0, head_stride = 0;

  int64_t offset(int b, int token, int h) const {
    const int32_t page = pages[size_t(b) * kv.max_pages_per_seq + size_t(token / kv.page_size)];
    return page * page_stride + (token % kv.page_size) * token_stride + h * head_stride;
  }
  int32_t slot(int b, int token) const {
    return pages[size_t(b) * kv.max_pages_per_seq + size_t(token / kv.page_size)] * kv.page_size +
           token % kv.page_size;
  }
};

/// Logical K/V per sequence: [batch][token][head][d], rounded to the dtype.
struct Tokens {
  std::vector<std::vector<float>> k, v;
  float at_k(const DecodeCase &c, int b, int t, int h, int d) const {
    return k[size_t(b)][(size_t(t) * c.heads_kv + h) * c.head_dim + d];
  }
  float at_v(const DecodeCase &c, int b, int t, int h, int d) const {
    return v[size_t(b)][(size_t(t) * c.heads_kv + h) * c.head_dim + d];
  }
};

/// The cache holding every token but each sequence's last seqlen_q (those are appended through the C ABI).
PagedCache make_cache(const DecodeCase &c, const Tokens &tok) {
  const int batch = int(c.lens.size());
  PagedCache pc;
  int max_pages = 0, used = 0;
  for (int L : c.lens) {
    max_pages = std::max(max_pages, (L + c.page_size - 1) / c.page_size);
    used += (L + c.page_size - 1) / c.page_size;
  }
  max_pages += 1;                   // one spare entry per row: never read
  const int num_pages = used + 3;   // pages no sequence owns: never read
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  pc.pages.assign(size_t(batch) * max_pages, 1 << 24);  // far outside the pages
  for (int b = 0, next = 0; b < batch; ++b)
    for (int p = 0; p < (c.lens[size_t(b)] + c.page_size - 1) / c.page_size; ++p)
      pc.pages[size_t(b) * max_pages + p] = order[size_t(next++)];

  pc.head_stride = c.head_dim;
  pc.token_stride = int64_t(c.heads_kv) * c.head_dim + c.token_pad;
  pc.page_stride = c.page_size * pc.token_stride;
  tilejit_paged_kv &kv = pc.kv;
  kv.dtype = c.dtype == DType::bf16 ? TILEJIT_DTYPE_BF16 : TILEJIT_DTYPE_F16;
  kv.num_pages = num_pages;
  kv.page_size = c.page_size;
  kv.heads_kv = c.heads_kv;
  kv.head_dim = c.head_dim;
  kv.max_pages_per_seq = max_pages;
  if (c.token_pad) {  // explicit strides; 0 (contiguous) otherwise
    kv.page_stride = pc.page_stride;
    kv.token_stride = pc.token_stride;
    kv.head_stride = pc.head_stride;
  }

  const size_t elems = size_t(num_pages) * pc.page_stride;
  std::vector<uint16_t> kb(elems, nan_bits(c.dtype)), vb(elems, nan_bits(c.dtype));
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < c.lens[size_t(b)] - c.seqlen_q; ++t)
      for (int h = 0; h < c.heads_kv; ++h)
        for (int d = 0; d < c.head_dim; ++d) {
          kb[size_t(pc.offset(b, t, h) + d)] = to_bits(tok.at_k(c, b, t, h, d), c.dtype);
          vb[size_t(pc.offset(b, t, h) + d)] = to_bits(tok.at_v(c, b, t, h, d), c.dtype);
        }
  pc.k = Buffer(elems * 2, Backend::Interpreter);
  pc.v = Buffer(elems * 2, Backend::Interpreter);
  pc.k.upload(kb);
  pc.v.upload(vb);
  pc.table = Buffer(pc.pages.size() * 4, Backend::Interpreter);
  pc.table.upload(pc.pages);
  std::vector<int32_t> lens(c.lens.begin(), c.lens.end());
  pc.lens = Buffer(lens.size() * 4, Backend::Interpreter);
  pc.lens.upload(lens);
  kv.k_pages = addr(pc.k);
  kv.v_pages = addr(pc.v);
  kv.block_table = static_cast<const int32_t *>(addr(pc.table));
  kv.seq_lens = static_cast<const int32_t *>(addr(pc.lens));
  return pc;
}

/// Appends each sequence's last seqlen_q tokens through tilejit_paged_kv_append, with one padding token
/// (slot −1) between sequences that must be skipped, and checks that exactly their slots were written.
void append_new_tokens(const DecodeCase &c, const Tokens &tok, PagedCache &pc) {
  const int batch = int(c.lens.size()), row = c.heads_kv * c.head_dim;
  std::vector<uint16_t> kn, vn;
  std::vector<int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    for (int t = c.lens[size_t(b)] - c.seqlen_q; t < c.lens[size_t(b)]; ++t) {
      for (int h = 0; h < c.heads_kv; ++h)
        for (int d = 0; d < c.head_dim; ++d) {
          kn.push_back(to_bits(tok.at_k(c, b, t, h, d), c.dtype));
          vn.push_back(to_bits(tok.at_v(c, b, t, h, d), c.dtype));
        }
      slots.push_back(pc.slot(b, t));
    }
    for (int i = 0; i < row; ++i) kn.push_back(to_bits(7.f, c.dtype)), vn.push_back(to_bits(7.f, c.dtype));
    slots.push_back(-1);  // padding: skipped
  }
  const auto before_k = pc.k.download_as<uint16_t>(pc.k.bytes() / 2);
  const auto before_v = pc.v.download_as<uint16_t>(pc.v.bytes() / 2);
  Buffer bk(kn.size() * 2, Backend::Interpreter), bv(vn.size() * 2, Backend::Interpreter);
  Buffer bs(slots.size() * 4, Backend::Interpreter);
  bk.upload(kn);
  bv.upload(vn);
  bs.upload(slots);
  int rc = tilejit_paged_kv_append(&pc.kv, addr(bk), addr(bv), static_cast<const int32_t *>(addr(bs)),
                                   int(slots.size()), nullptr);
  INFO("tilejit_paged_kv_append: " << tilejit_last_error());
  REQUIRE(rc == TILEJIT_OK);

  // Exactly the new tokens' elements changed, to exactly the given bits.
  auto expected_k = before_k, expected_v = before_v;
  for (int b = 0; b < batch; ++b)
    for (int t = c.lens[size_t(b)] - c.seqlen_q; t < c.lens[size_t(b)]; ++t)
      for (int h = 0; h < c.heads_kv; ++h)
        for (int d = 0; d < c.head_dim; ++d) {
          expected_k[size_t(pc.offset(b, t, h) + d)] = to_bits(tok.at_k(c, b, t, h, d), c.dtype);
          expected_v[size_t(pc.offset(b, t, h) + d)] = to_bits(tok.at_v(c, b, t, h, d), c.dtype);
        }
  CHECK(pc.k.download_as<uint16_t>(pc.k.bytes() / 2) == expected_k);
  CHECK(pc.v.download_as<uint16_t>(pc.v.bytes() / 2) == expected_v);
}

/// Whether key j is visible from the query at position pos under the variant (bands anchored on positions).
bool visible(const tilejit_flex_variant &v, int pos, int j) {
  if (v.causal && j > pos) return false;
  if (v.window_left >= 0 && j < pos - v.window_left) return false;
  if (v.window_right >= 0 && j > pos + v.window_right) return false;
  return true;
}

/// Appends, plans, runs and compares with float64: q [batch, seqlen_q, heads_q, d], out likewise.
void require_decode_matches(const DecodeCase &c) {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  const int B = int(c.lens.size()), Hq = c.heads_q, Hkv = c.heads_kv, D = c.head_dim, Sq = c.seqlen_q;
  Tokens tok;
  for (int L : c.lens) {
    tok.k.push_back(random_values(size_t(L) * Hkv * D, c.dtype));
    tok.v.push_back(random_values(size_t(L) * Hkv * D, c.dtype));
  }
  PagedCache pc = make_cache(c, tok);
  append_new_tokens(c, tok, pc);

  const size_t rows = size_t(B) * Sq * Hq;
  std::vector<float> q = random_values(rows * D, c.dtype);
  std::vector<uint16_t> qb(q.size());
  for (size_t i = 0; i < q.size(); ++i) qb[i] = to_bits(q[i], c.dtype);
  Buffer bq(qb.size() * 2, Backend::Interpreter), out(rows * D * 2, Backend::Interpreter);
  Buffer lse(rows * 4, Backend::Interpreter);
  bq.upload(qb);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);

  tilejit_decode_plan *plan = nullptr;
  int rc = tilejit_decode_plan_create(&plan, &pc.kv, B, Hq, Sq, 0, &c.variant, c.softmax_scale, c.num_splits, 0, 0,
                                      0);
  INFO("tilejit_decode_plan_create: " << tilejit_last_error());
  REQUIRE(rc == TILEJIT_OK);
  REQUIRE(plan != nullptr);
  int splits = -1, block_n = -1;
  int64_t scratch = -1;
  REQUIRE(tilejit_decode_plan_info(plan, &splits, &block_n, &scratch) == TILEJIT_OK);
  INFO("plan: " << splits << " splits, block_n " << block_n << ", scratch " << scratch << " bytes");
  CHECK(splits >= 1);
  if (c.num_splits) CHECK(splits == c.num_splits);
  CHECK(block_n >= 16);
  CHECK((splits == 1) == (scratch == 0));
  rc = tilejit_decode_plan_run(plan, addr(bq), addr(out), c.want_lse ? static_cast<float *>(addr(lse)) : nullptr,
                               &pc.kv, nullptr);
  INFO("tilejit_decode_plan_run: " << tilejit_last_error());
  REQUIRE(rc == TILEJIT_OK);
  CHECK(std::string(tilejit_last_error()).empty());
  REQUIRE(tilejit_decode_plan_destroy(plan) == TILEJIT_OK);

  FlexResult res;
  auto ob = out.download_as<uint16_t>(rows * D);
  for (uint16_t x : ob) res.out.push_back(from_bits(x, c.dtype));
  if (c.want_lse) res.lse = lse.download_as<float>(rows);
  res.ref_out.assign(res.out.size(), 0.0);
  res.ref_lse.assign(res.lse.size(), -INFINITY);
  const std::vector<float> slopes = attention::alibi_slopes(Hq);
  const double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(D));
  for (int b = 0; b < B; ++b) {
    const int L = c.lens[size_t(b)];
    std::vector<double> p(static_cast<size_t>(L));
    for (int i = 0; i < Sq; ++i)
      for (int h = 0; h < Hq; ++h) {
        const int kh = h / (Hq / Hkv), pos = L - Sq + i;
        const size_t r = (size_t(b) * Sq + i) * Hq + h;
        double mx = -INFINITY;
        for (int j = 0; j < L; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += double(q[r * D + d]) * tok.at_k(c, b, j, kh, d);
          s *= scale;
          if (c.variant.alibi) s -= double(slopes[size_t(h)]) * std::abs(pos - j);
          if (c.variant.softcap > 0) s = c.variant.softcap * std::tanh(s / c.variant.softcap);
          p[size_t(j)] = visible(c.variant, pos, j) ? s : -INFINITY;
          mx = std::max(mx, p[size_t(j)]);
        }
        if (mx == -INFINITY) {
          ++res.empty_rows;
          continue;
        }
        double sum = 0;
        for (double &x : p) sum += (x = std::exp(x - mx));
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j < L; ++j) acc += p[size_t(j)] * tok.at_v(c, b, j, kh, d);
          res.ref_out[r * D + d] = acc / sum;
        }
        if (c.want_lse) res.ref_lse[r] = mx + std::log(sum);
      }
  }
  require_matches(res, c.dtype);
}

}  // namespace

TEST_CASE("C ABI decode: append, then a planned decode step over shuffled pages matches float64",
          "[c_api][decode]") {
  DecodeCase c;
  SECTION("one new token, GQA 4:2, bf16") { require_decode_matches(c); }
  SECTION("three new tokens (causal among them), f16") {
    c.seqlen_q = 3;
    c.dtype = DType::f16;
    c.variant.causal = 1;
    require_decode_matches(c);
  }
  SECTION("causal sliding window of 20 keys to the left, two new tokens") {
    c.seqlen_q = 2;
    c.variant.causal = 1;
    c.variant.window_left = 20;
    require_decode_matches(c);
  }
  SECTION("ALiBi, MQA with 3 query heads (not a power of two)") {
    c.heads_q = 3;
    c.heads_kv = 1;
    c.variant.alibi = 1;
    require_decode_matches(c);
  }
  SECTION("soft-cap 2 with a user scale") {
    c.variant.softcap = 2.f;
    c.softmax_scale = 0.5f;
    require_decode_matches(c);
  }
  SECTION("padded page layout (explicit strides), 3 forced splits, no lse") {
    c.token_pad = 8;
    c.num_splits = 3;
    c.want_lse = false;
    c.lens = {70, 33, 16};
    require_decode_matches(c);
  }
  SECTION("pages of 64 with a short sequence, ALiBi and soft-cap, four new tokens") {
    c.page_size = 64;
    c.lens = {5, 130};
    c.seqlen_q = 4;
    c.variant.causal = 1;
    c.variant.alibi = 1;
    c.variant.softcap = 3.f;
    require_decode_matches(c);
  }
}

TEST_CASE("C ABI decode: bad arguments return an error code and a clear message", "[c_api][decode]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  Buffer mem(1 << 16, Backend::Interpreter);
  mem.fill_bytes(0);
  void *p = addr(mem);
  auto error = [] { return std::string(tilejit_last_error()); };
  tilejit_paged_kv kv{};
  kv.k_pages = kv.v_pages = p;
  kv.block_table = kv.seq_lens = static_cast<const int32_t *>(p);
  kv.dtype = TILEJIT_DTYPE_BF16;
  kv.num_pages = 4;
  kv.page_size = 16;
  kv.heads_kv = 2;
  kv.head_dim = 32;
  kv.max_pages_per_seq = 2;
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  tilejit_decode_plan *plan = nullptr;
  auto create = [&](const tilejit_paged_kv *cache, int heads_q = 4, int seqlen_q = 1) {
    return tilejit_decode_plan_create(&plan, cache, 1, heads_q, seqlen_q, 0, &var, 0.f, 0, 0, 0, 0);
  };

  CHECK(tilejit_decode_plan_create(nullptr, &kv, 1, 4, 1, 0, &var, 0.f, 0, 0, 0, 0) ==
        TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_decode_plan_create: ") && Catch::Contains("plan is null"));
  CHECK(create(nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("cache is null"));
  CHECK(plan == nullptr);

  tilejit_paged_kv bad = kv;
  bad.v_pages = nullptr;
  CHECK(create(&bad) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("pointer 'v_pages' is null"));
  bad = kv;
  bad.dtype = 5;
  CHECK(create(&bad) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("dtype 5 is not supported (0: bf16, 1: f16)"));

  var.softcap = -1.f;
  CHECK(create(&kv) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("softcap -1 must be a finite value ≥ 0"));
  var.softcap = 0.f;
  var.window_left = -3;
  CHECK(create(&kv) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("sliding window sides must be ≥ 0, or −1 for unbounded (got left -3"));
  var.window_left = -1;
  var.doc_ids = static_cast<const int32_t *>(p);
  CHECK(create(&kv) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("doc_ids (document masking) is not supported by decode"));
  var.doc_ids = nullptr;
  CHECK(tilejit_decode_plan_create(&plan, &kv, 1, 4, 1, 0, &var, 0.f, 0, -16, 0, 0) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("block_n -16, num_warps 0, num_stages 0 must be ≥ 0"));

  // The library's own validation (DecodePlan): the field and the value are named.
  CHECK(create(&kv, 3) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_decode_plan_create: ") && Catch::Contains("heads_q") &&
                          Catch::Contains("3"));
  CHECK(create(&kv, 4, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("seqlen_q") && Catch::Contains("17"));
  bad = kv;
  bad.page_size = 24;
  CHECK(create(&bad) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("page_size 24"));
  CHECK(plan == nullptr);

  // Run, info and append.
  CHECK(tilejit_decode_plan_run(nullptr, p, p, nullptr, &kv, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_decode_plan_run: ") && Catch::Contains("plan is null"));
  CHECK(tilejit_decode_plan_info(nullptr, nullptr, nullptr, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("plan is null"));
  CHECK(create(&kv) == TILEJIT_OK);
  CHECK(error().empty());
  REQUIRE(plan != nullptr);
  CHECK(tilejit_decode_plan_run(plan, nullptr, p, nullptr, &kv, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("pointer 'q' is null"));
  bad = kv;
  bad.page_size = 32;  // another layout than the plan's
  CHECK(tilejit_decode_plan_run(plan, p, p, nullptr, &bad, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_decode_plan_run: ") && Catch::Contains("layout") &&
                          Catch::Contains("page size 32"));
  CHECK(tilejit_decode_plan_destroy(plan) == TILEJIT_OK);
  CHECK(tilejit_decode_plan_destroy(nullptr) == TILEJIT_OK);

  const int32_t *slots = static_cast<const int32_t *>(p);
  CHECK(tilejit_paged_kv_append(&kv, p, p, slots, -1, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_paged_kv_append: ") && Catch::Contains("tokens -1 must be ≥ 0"));
  CHECK(tilejit_paged_kv_append(&kv, p, p, nullptr, 1, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("pointer 'slot_mapping' is null"));
  CHECK(tilejit_paged_kv_append(nullptr, p, p, slots, 1, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("cache is null"));
  CHECK(tilejit_paged_kv_append(&kv, p, p, slots, 0, nullptr) == TILEJIT_OK);  // nothing to write
}
