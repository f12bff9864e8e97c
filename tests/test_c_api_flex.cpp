// The C ABI's flex attention entry (tilejit_flex_attention_forward) on the CPU interpreter
// (TILEJIT_INTERPRET=1: the raw pointers are host memory): every built-in variant, GQA, strided layouts,
// odd lengths, against the float64 reference of the flex tests; the caches (no retrace, block masks
// rebuilt only for a new pointer); and the argument errors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "flex_reference.h"
#include "kernels/c_api_flex_internal.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/c_api.h"
#include "tilejit/numerics.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {

/// A [B, H, S, D] tensor with arbitrary element strides, stored in an interpreter (host) buffer whose
/// gaps hold NaN bits, so a kernel reading outside the described elements would poison its result.
struct StridedTensor {
  int B = 0, H = 0, S = 0, D = 0;
  int64_t st[4] = {0, 0, 0, 1};
  std::vector<float> values;  // logical contiguous [B, H, S, D], rounded to the dtype
  Buffer buf;

  size_t offset(int b, int h, int s, int d) const {
    return size_t(b * st[0] + h * st[1] + s * st[2] + d * st[3]);
  }
  float at(int b, int h, int s, int d) const { return values[((size_t(b) * H + h) * S + s) * D + d]; }
};

enum class Layout { BHSD, BSHD };  // BSHD: heads interleaved per token (a transposed PyTorch tensor)

StridedTensor make_tensor(int B, int H, int S, int D, DType dt, Layout layout, bool random = true) {
  StridedTensor t{B, H, S, D};
  if (layout == Layout::BHSD) {
    t.st[0] = int64_t(H) * S * D, t.st[1] = int64_t(S) * D, t.st[2] = D;
  } else {
    t.st[0] = int64_t(S) * H * D, t.st[1] = D, t.st[2] = int64_t(H) * D;
  }
  size_t n = size_t(B) * H * S * D;
  t.values = random ? random_values(n, dt) : std::vector<float>(n, 0.f);
  std::vector<uint16_t> bits(std::max<size_t>(n, 1), dt == DType::bf16 ? 0x7fc0 : 0x7e00);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int s = 0; s < S; ++s)
        for (int d = 0; d < D; ++d) {
          float x = t.at(b, h, s, d);
          bits[t.offset(b, h, s, d)] = dt == DType::bf16 ? float_to_bf16(x) : float_to_f16(x);
        }
  t.buf = Buffer(bits.size() * 2, Backend::Interpreter);
  t.buf.upload(bits);
  return t;
}

std::vector<float> read_tensor(const StridedTensor &t, DType dt) {
  auto bits = t.buf.download_as<uint16_t>(t.buf.bytes() / 2);
  std::vector<float> v(size_t(t.B) * t.H * t.S * t.D);
  for (int b = 0; b < t.B; ++b)
    for (int h = 0; h < t.H; ++h)
      for (int s = 0; s < t.S; ++s)
        for (int d = 0; d < t.D; ++d) {
          uint16_t x = bits[t.offset(b, h, s, d)];
          v[((size_t(b) * t.H + h) * t.S + s) * t.D + d] = dt == DType::bf16 ? bf16_to_float(x) : f16_to_float(x);
        }
  return v;
}

struct AbiCase {
  int batch = 2, heads_q = 3, heads_kv = 3, seqlen_q = 17, seqlen_k = 17, head_dim = 32;
  DType dtype = DType::bf16;
  Layout layout = Layout::BHSD;
  float softmax_scale = 0.f;
  bool want_lse = true;
  std::vector<int32_t> docs;  // non-empty: document ids [batch, seqlen]
  tilejit_flex_variant variant{};
  AbiCase() { tilejit_flex_variant_init(&variant); }
};

/// The float64 mods matching the variant struct (score: ALiBi then soft-cap; visible: band ∧ document).
RefMods reference_mods(const AbiCase &c) {
  const tilejit_flex_variant v = c.variant;
  std::vector<float> slopes = attention::alibi_slopes(c.heads_q);
  RefMods ref;
  ref.score = [v, slopes](double s, int, int h, int q, int kv) {
    if (v.alibi) s -= double(slopes[size_t(h)]) * std::abs(q - kv);
    if (v.softcap > 0) s = v.softcap * std::tanh(s / v.softcap);
    return s;
  };
  const auto align = v.bottom_right ? attention::Align::BottomRight : attention::Align::TopLeft;
  std::vector<int32_t> docs = c.docs;
  const int S = c.seqlen_q;
  ref.visible = [v, align, docs, S](int b, int, int q, int kv, int sq, int sk) {
    if (v.causal && !ref_band({-1, 0, align}, q, kv, sq, sk)) return false;
    if (!ref_band({v.window_left, v.window_right, align}, q, kv, sq, sk)) return false;
    if (!docs.empty() && docs[size_t(b) * S + q] != docs[size_t(b) * S + kv]) return false;
    return true;
  };
  return ref;
}

struct AbiRun {
  int rc = -1;
  std::string error;
  FlexResult result;
};

/// Calls the C ABI on fresh random inputs (doc ids from c.docs) and computes the float64 reference.
AbiRun run_abi(AbiCase c, const Buffer *doc_buffer = nullptr) {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  const int B = c.batch, Hq = c.heads_q, Hkv = c.heads_kv, Sq = c.seqlen_q, Sk = c.seqlen_k, D = c.head_dim;
  auto q = make_tensor(B, Hq, Sq, D, c.dtype, c.layout);
  auto k = make_tensor(B, Hkv, Sk, D, c.dtype, c.layout);
  auto v = make_tensor(B, Hkv, Sk, D, c.dtype, c.layout);
  auto o = make_tensor(B, Hq, Sq, D, c.dtype, c.layout, false);
  o.buf.fill_bytes(0xff);
  Buffer lse(std::max<size_t>(size_t(B) * Hq * Sq, 1) * 4, Backend::Interpreter);
  lse.fill_bytes(0xff);
  Buffer docs;
  if (!c.docs.empty() && !doc_buffer) {
    docs = Buffer(c.docs.size() * 4, Backend::Interpreter);
    docs.upload(c.docs);
    doc_buffer = &docs;
  }
  c.variant.doc_ids = doc_buffer ? reinterpret_cast<const int32_t *>(uintptr_t(doc_buffer->address())) : nullptr;
  auto addr = [](const Buffer &b) { return reinterpret_cast<void *>(uintptr_t(b.address())); };
  AbiRun r;
  r.rc = tilejit_flex_attention_forward(addr(q.buf), addr(k.buf), addr(v.buf), addr(o.buf),
                                        c.want_lse ? static_cast<float *>(addr(lse)) : nullptr,
                                        c.dtype == DType::bf16 ? TILEJIT_DTYPE_BF16 : TILEJIT_DTYPE_F16, B, Hq, Hkv,
                                        Sq, Sk, D, q.st, k.st, v.st, o.st, c.softmax_scale, &c.variant, nullptr);
  r.error = tilejit_last_error();
  // A block mask cached for the temporary ids must not be found again when the address is reused.
  if (docs.address() && c.variant.reuse_block_mask) REQUIRE(tilejit_flex_clear_cache() == TILEJIT_OK);
  if (r.rc != TILEJIT_OK) return r;

  FlexResult &res = r.result;
  res.out = read_tensor(o, c.dtype);
  res.lse = c.want_lse ? lse.download_as<float>(size_t(B) * Hq * Sq) : std::vector<float>{};
  res.ref_out.assign(res.out.size(), 0.0);
  res.ref_lse.assign(res.lse.size(), -INFINITY);
  RefMods ref = reference_mods(c);
  const double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(D));
  std::vector<double> p(static_cast<size_t>(Sk));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      const int kh = h / (Hq / Hkv);
      for (int i = 0; i < Sq; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j < Sk; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q.at(b, h, i, d)) * k.at(b, kh, j, d);
          p[size_t(j)] = ref.visible(b, h, i, j, Sq, Sk) ? ref.score(dot * scale, b, h, i, j) : -INFINITY;
          mx = std::max(mx, p[size_t(j)]);
        }
        if (mx == -INFINITY) {
          ++res.empty_rows;
          continue;
        }
        double sum = 0;
        for (auto &x : p) sum += (x = std::exp(x - mx));
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j < Sk; ++j) acc += p[size_t(j)] * v.at(b, kh, j, d);
          res.ref_out[((size_t(b) * Hq + h) * Sq + i) * D + d] = acc / sum;
        }
        if (c.want_lse) res.ref_lse[(size_t(b) * Hq + h) * Sq + i] = mx + std::log(sum);
      }
    }
  return r;
}

void require_abi_matches(const AbiCase &c, const Buffer *doc_buffer = nullptr) {
  AbiRun r = run_abi(c, doc_buffer);
  INFO("rc " << r.rc << ": " << r.error);
  REQUIRE(r.rc == TILEJIT_OK);
  REQUIRE(r.error.empty());
  require_matches(r.result, c.dtype);
}

/// Documents of uneven lengths (3, 11, 1, ...), different per batch element.
std::vector<int32_t> uneven_documents(int batch, int seqlen) {
  std::vector<int32_t> ids(size_t(batch) * seqlen);
  const int lengths[] = {3, 11, 1, 7, 16, 2};
  for (int b = 0; b < batch; ++b) {
    int doc = 0, left = lengths[b % 6];
    for (int i = 0; i < seqlen; ++i) {
      if (left == 0) left = lengths[size_t(++doc + b) % 6];
      ids[size_t(b) * seqlen + i] = doc;
      --left;
    }
  }
  return ids;
}

}  // namespace

TEST_CASE("C ABI flex: each built-in variant matches the float64 reference", "[c_api][flex]") {
  const int len = GENERATE(17, 70);
  const DType dt = GENERATE(DType::bf16, DType::f16);
  {
    {
      AbiCase c;
      c.seqlen_q = c.seqlen_k = len;
      c.dtype = dt;
      c.variant.block_m = 16;
      c.variant.block_n = 32;
      INFO("seqlen " << len << ", " << dtype_name(dt));
      SECTION("no mod") { require_abi_matches(c); }
      SECTION("causal top-left") {
        c.variant.causal = 1;
        require_abi_matches(c);
      }
      SECTION("causal + sliding window (left 5)") {
        c.variant.causal = 1;
        c.variant.window_left = 5;
        require_abi_matches(c);
      }
      SECTION("two-sided window (left 3, right 2)") {
        c.variant.window_left = 3;
        c.variant.window_right = 2;
        require_abi_matches(c);
      }
      SECTION("ALiBi (3 heads: not a power of two)") {
        c.variant.alibi = 1;
        require_abi_matches(c);
      }
      SECTION("softcap 50") {
        c.variant.softcap = 50.f;
        c.softmax_scale = 4.f;  // scores of several units, so the cap bends them a little
        require_abi_matches(c);
      }
      SECTION("softcap 0.5 (bends every score)") {
        c.variant.softcap = 0.5f;
        require_abi_matches(c);
      }
      SECTION("document mask") {
        c.docs = uneven_documents(c.batch, len);
        c.variant.block_m = c.variant.block_n = 16;
        require_abi_matches(c);
      }
      SECTION("everything: causal window, ALiBi, softcap, documents, GQA") {
        c.heads_q = 4;
        c.heads_kv = 2;
        c.variant.causal = 1;
        c.variant.window_left = 9;
        c.variant.alibi = 1;
        c.variant.softcap = 2.f;
        c.docs = uneven_documents(c.batch, len);
        require_abi_matches(c);
      }
    }
  }
}

TEST_CASE("C ABI flex: GQA / MQA, seqlen_q != seqlen_k, strided layouts, default blocks", "[c_api][flex]") {
  AbiCase c;
  SECTION("GQA 4:2 causal, default blocks") {
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = c.seqlen_k = 70;
    c.variant.causal = 1;
    require_abi_matches(c);
  }
  SECTION("MQA 3:1 with ALiBi") {
    c.heads_kv = 1;
    c.variant.alibi = 1;
    require_abi_matches(c);
  }
  SECTION("causal bottom-right, 17 queries over 70 keys") {
    c.seqlen_q = 17;
    c.seqlen_k = 70;
    c.variant.causal = 1;
    c.variant.bottom_right = 1;
    c.variant.block_m = c.variant.block_n = 16;
    require_abi_matches(c);
  }
  SECTION("causal top-left, 70 queries over 17 keys, f16, a user scale") {
    c.seqlen_q = 70;
    c.seqlen_k = 17;
    c.dtype = DType::f16;
    c.softmax_scale = 0.3f;
    c.variant.causal = 1;
    require_abi_matches(c);
  }
  SECTION("heads interleaved per token ([b, s, h, d] memory), causal window, no lse") {
    c.layout = Layout::BSHD;
    c.seqlen_q = c.seqlen_k = 70;
    c.variant.causal = 1;
    c.variant.window_left = 20;
    c.want_lse = false;
    c.variant.block_m = 32;
    c.variant.block_n = 16;
    require_abi_matches(c);
  }
}

TEST_CASE("C ABI flex: repeated calls reuse the traced kernel and the document block mask", "[c_api][flex]") {
  AbiCase c;
  c.seqlen_q = c.seqlen_k = 40;
  const std::vector<int32_t> docs = uneven_documents(c.batch, 40);
  c.docs = docs;
  c.variant.causal = 1;
  c.variant.window_left = 3;  // changed to 5 below: both not multiples of 16, one specialization
  c.variant.softcap = 3.f;
  c.variant.reuse_block_mask = 1;
  c.variant.block_m = c.variant.block_n = 16;
  Buffer ids(docs.size() * 4, Backend::Interpreter);
  ids.upload(docs);

  require_abi_matches(c, &ids);
  auto first = c_api_detail::flex_cache_stats();
  // Same settings, new inputs: nothing traced or built again.
  require_abi_matches(c, &ids);
  auto second = c_api_detail::flex_cache_stats();
  CHECK(second.variants == first.variants);
  CHECK(second.traced_specializations == first.traced_specializations);
  CHECK(second.block_mask_builds == first.block_mask_builds);
  // Another cap and another window: kernel arguments only (window sides keep their divisibility by 16).
  c.variant.softcap = 0.7f;
  c.variant.window_left = 5;
  require_abi_matches(c, &ids);
  auto third = c_api_detail::flex_cache_stats();
  CHECK(third.variants == first.variants);
  CHECK(third.traced_specializations == first.traced_specializations);
  CHECK(third.block_mask_builds == first.block_mask_builds + 1);  // the band changed the visible blocks

  // Other ids behind another pointer: a new block mask, and the new ids are used.
  c.docs = docs;
  for (auto &d : c.docs) d = d / 2;  // merge neighbouring documents
  require_abi_matches(c);
  auto fourth = c_api_detail::flex_cache_stats();
  CHECK(fourth.block_mask_builds == third.block_mask_builds + 1);
  CHECK(fourth.traced_specializations == first.traced_specializations);

  CHECK(tilejit_flex_clear_cache() == TILEJIT_OK);
  CHECK(c_api_detail::flex_cache_stats().block_masks == 0);

  // Without reuse_block_mask every call builds its own (and caches nothing).
  c.docs = docs;  // what `ids` holds
  c.variant.reuse_block_mask = 0;
  require_abi_matches(c, &ids);
  require_abi_matches(c, &ids);
  auto fifth = c_api_detail::flex_cache_stats();
  CHECK(fifth.block_mask_builds == fourth.block_mask_builds + 2);
  CHECK(fifth.block_masks == 0);
}

TEST_CASE("C ABI flex: ALiBi slopes are uploaded once per head count", "[c_api][flex]") {
  AbiCase c;
  c.heads_q = c.heads_kv = 5;
  c.variant.alibi = 1;
  require_abi_matches(c);
  auto before = c_api_detail::flex_cache_stats();
  require_abi_matches(c);
  CHECK(c_api_detail::flex_cache_stats().slope_buffers == before.slope_buffers);
  c.heads_q = c.heads_kv = 6;
  require_abi_matches(c);
  CHECK(c_api_detail::flex_cache_stats().slope_buffers == before.slope_buffers + 1);
}

TEST_CASE("C ABI flex: bad arguments return an error code and a clear message", "[c_api][flex]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  Buffer mem(1 << 16, Backend::Interpreter);
  void *p = reinterpret_cast<void *>(uintptr_t(mem.address()));
  int64_t st[4] = {2 * 17 * 32, 17 * 32, 32, 1};
  tilejit_flex_variant v;
  tilejit_flex_variant_init(&v);
  auto call = [&](const void *q, int heads_q, int heads_kv, int sq, int sk, int dtype = TILEJIT_DTYPE_BF16) {
    return tilejit_flex_attention_forward(q, p, p, p, nullptr, dtype, 1, heads_q, heads_kv, sq, sk, 32, st, st, st,
                                          st, 0.f, &v, nullptr);
  };
  auto error = [] { return std::string(tilejit_last_error()); };

  CHECK(call(nullptr, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::StartsWith("tilejit_flex_attention_forward: ") && Catch::Contains("pointer 'q' is null"));

  CHECK(call(p, 4, 3, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("heads_q (4) must be a multiple of heads_kv (3)"));
  CHECK(call(p, 4, 0, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("heads_kv (0)"));

  v.window_left = -2;
  CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("sliding window sides must be ≥ 0, or −1 for unbounded (got left -2, right -1)"));
  v.window_left = -1;
  v.window_right = -7;
  CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("right -7"));
  v.window_right = -1;

  v.softcap = -50.f;
  CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("softcap -50 must be a finite value ≥ 0"));
  v.softcap = 0.f;

  v.doc_ids = static_cast<const int32_t *>(p);
  CHECK(call(p, 2, 2, 17, 19) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("doc_ids (document masking) needs seqlen_q == seqlen_k (got 17 and 19)"));
  // Options are validated before the document block mask is built, so a bad option is reported as such and
  // not as an internal error of the mask-building kernel.
  for (int w : {3, 64}) {
    v.num_warps = w;
    CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(error(), Catch::Contains(fmt::format("num_warps {} must be a power of two in [1, 16]", w)));
  }
  v.num_warps = 0;
  v.doc_ids = nullptr;

  CHECK(call(p, 2, 2, 17, 17, 5) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("dtype 5 is not supported (0: bf16, 1: f16)"));

  v.block_m = 48;
  CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("BLOCK_M 48 must be a power of two in [16, 256]"));
  v.block_m = 0;

  st[3] = 2;
  CHECK(call(p, 2, 2, 17, 17) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(error(), Catch::Contains("last dimension must be contiguous"));
  st[3] = 1;

  // A good call clears the message; an empty problem is a valid no-op.
  CHECK(call(p, 2, 2, 0, 0) == TILEJIT_OK);
  CHECK(error().empty());
  // NULL variant: no mod.
  CHECK(tilejit_flex_attention_forward(p, p, p, p, nullptr, 0, 0, 2, 2, 17, 17, 32, st, st, st, st, 0.f, nullptr,
                                       nullptr) == TILEJIT_OK);
}
