// Paged decode (DecodePlan, paged_decode) and chunked prefill over a paged cache (flex_forward with
// FlexOptions::kv_cache) on the interpreter, against float64 (tests/paged_checks.h states the tolerances).
// Small head dims and a few heads keep the interpreter quick; tests/gpu/test_gpu_paged.cpp runs the same
// checks at serving shapes.
#include <catch2/catch.hpp>

#include "paged_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {
constexpr Backend kBe = Backend::Interpreter;
}

TEST_CASE("paged decode: context lengths 0, 1, P-1, P, P+1, 1000 in one batch, shuffled pages",
          "[paged][decode][cpu]") {
  for (int P : {1, 16, 64}) check_decode_context_edges(kBe, P, PagedStrides::Contiguous, 32, 0, 1000);
  check_decode_context_edges(kBe, 16, PagedStrides::Padded, 32, 16, 1000);
  check_decode_context_edges(kBe, 64, PagedStrides::HeadsMajor, 16, 32, 300);
  // A head dim that is not a power of two, MQA.
  check_decode_context_edges(kBe, 16, PagedStrides::Contiguous, 48, 0, 100, 4, 1);
}

TEST_CASE("paged decode: page sizes 3, 0, 512 rejected with the value in the message", "[paged][decode][cpu]") {
  for (int P : {3, 0, 512, -8, 24}) check_decode_rejects_page_size(kBe, P);
}

TEST_CASE("paged decode: GQA 1, 4, 8 and MQA", "[paged][decode][cpu]") {
  check_decode_gqa(kBe, 4, 4, 32, {37, 0, 130, 16, 1});  // 1 (a sequence shorter than its queries)
  check_decode_gqa(kBe, 8, 2, 32, {37, 0, 130, 16});  // 4
  check_decode_gqa(kBe, 16, 2, 16, {37, 200, 5});     // 8
  check_decode_gqa(kBe, 4, 1, 32, {37, 0, 130, 16});  // MQA
  check_decode_gqa(kBe, 8, 1, 16, {64, 65});          // MQA, 8
}

TEST_CASE("paged decode: seqlen_q 1, 2, 4, 16 with a causal mask", "[paged][decode][cpu]") {
  for (int sq : {1, 2, 4, 16}) check_decode_seqlen_q(kBe, sq, 16, 32, 300);
  check_decode_seqlen_q(kBe, 4, 1, 16, 100);
  check_decode_seqlen_q(kBe, 16, 64, 16, 200);
}

TEST_CASE("paged decode: every built-in mod, compositions, user score_mod and mask", "[paged][decode][cpu]") {
  check_decode_mods(kBe, 32, 300);
}

TEST_CASE("paged decode: a window lambda over a captured size follows the capture from run to run",
          "[paged][decode][cpu]") {
  check_decode_captured_window(Backend::Interpreter, 16, 70);
}

TEST_CASE("paged decode: a soft-cap over a captured cap follows the capture from run to run", "[paged][decode][cpu]") {
  check_decode_captured_cap(Backend::Interpreter, 16, 70);
}

TEST_CASE("paged decode: every split count gives the same result, empty splits", "[paged][decode][cpu]") {
  check_decode_split_counts(kBe, 32, 1000, 16);
}

TEST_CASE("paged decode: a plan runs again on new contents at the same addresses, lse optional",
          "[paged][decode][cpu]") {
  check_decode_plan_reuse(kBe, 32, 300);
}

TEST_CASE("paged decode: lengths beyond the cache's capacity attend to what it holds, negative ones to nothing",
          "[paged][decode][cpu]") {
  check_decode_lengths_beyond_capacity(kBe);
}

TEST_CASE("paged decode: bad shapes, caches and options named with their values", "[paged][decode][cpu]") {
  check_decode_errors(kBe);
}

TEST_CASE("paged decode: f16", "[paged][decode][cpu]") {
  DeviceCache d = make_device_cache(kBe, paged_spec({0, 1, 17, 200}, 16, 2, 32, PagedStrides::Padded, 0, DType::f16));
  DecodeOptions o = decode_options();
  o.mask = attention::causal_top_left();
  check_decode(kBe, d, 8, 1, o, ref_causal());
}

TEST_CASE("chunked prefill: flex_forward over a paged cache at positions L - q_len + i", "[paged][prefill][cpu]") {
  check_paged_prefill(kBe, 32, 150);
}

TEST_CASE("chunked prefill: k, v or cu_seqlens_k beside kv_cache, or a shape unlike the cache, rejected",
          "[paged][prefill][cpu]") {
  check_paged_prefill_errors(kBe);
}

TEST_CASE("paged decode: a sequence shorter than its queries, without a mask", "[paged][decode][cpu]") {
  // Queries at positions below 0 precede every key: with or without a mask they see none (output 0, lse −inf);
  // the others see the whole sequence.
  DeviceCache d = make_device_cache(kBe, paged_spec({1, 3, 40, 0}, 16, 2, 32));
  FlexResult r = check_decode(kBe, d, 8, 4, decode_options(16), {});
  REQUIRE(r.empty_rows == 8 * (3 + 1 + 4));  // lengths 1 and 3 put 3 and 1 queries before position 0
}
