// Paged decode, chunked prefill and paged_kv_append on the GPU (ctest label `gpu`): the interpreter tests'
// checks (tests/paged_checks.h) at serving shapes — head dim 128, contexts up to 32768, the library's block
// size as well as explicit ones — and the append kernel writing a cache that decode then reads.
#include <cmath>

#include "paged_checks.h"
#include "tilejit/device.h"
#include "tilejit/graph.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {
constexpr Backend kBe = Backend::GPU;
}

TEST_CASE("paged decode on the GPU: context lengths at page edges and long ones", "[gpu][paged]") {
  for (int P : {1, 16, 64}) check_decode_context_edges(kBe, P, PagedStrides::Contiguous, 128, 0, 32768, 32, 8, 0);
  check_decode_context_edges(kBe, 16, PagedStrides::Padded, 128, 0, 5000, 32, 8, 0);
  check_decode_context_edges(kBe, 16, PagedStrides::HeadsMajor, 64, 128, 3000, 8, 2, 0);
  check_decode_context_edges(kBe, 256, PagedStrides::Contiguous, 256, 0, 2000, 8, 1, 0);
  check_decode_context_edges(kBe, 16, PagedStrides::Contiguous, 96, 0, 1000, 8, 2, 32);
}

TEST_CASE("paged decode on the GPU: GQA groups, seqlen_q, mods", "[gpu][paged]") {
  check_decode_gqa(kBe, 32, 32, 128, {4097, 0, 130, 16, 1}, 0);
  check_decode_gqa(kBe, 32, 8, 128, {4097, 0, 130, 16, 1}, 0);
  check_decode_gqa(kBe, 64, 8, 128, {8000, 33}, 0);
  check_decode_gqa(kBe, 16, 1, 128, {3000, 1, 64}, 0);
  for (int sq : {1, 2, 4, 16}) check_decode_seqlen_q(kBe, sq, 16, 128, 5000, 0);
  check_decode_mods(kBe, 128, 3000, 0);
  check_decode_mods(kBe, 64, 1000, 64);
  check_decode_captured_window(kBe, 128, 3000, 0);
}

TEST_CASE("paged decode on the GPU: every split count, empty splits, plan reuse, errors", "[gpu][paged]") {
  check_decode_split_counts(kBe, 128, 20000, 64);
  check_decode_split_counts(kBe, 64, 3000, 16);
  check_decode_plan_reuse(kBe, 128, 10000, 0);
  check_decode_errors(kBe);
  for (int P : {3, 0, 512}) check_decode_rejects_page_size(kBe, P);
}

TEST_CASE("paged decode on the GPU: the one-wave tiling of a large batch of short sequences", "[gpu][paged]") {
  // 64 sequences × 8 KV heads are 512 programs. On a GPU of 128 to 255 SMs (the H100 and H200 have 132) that
  // is more than one wave of the 64-key tiling's two per SM, and a 32-key tiling (four per SM) or a 16-key
  // one-warp tiling fits them in one: the plan takes the smaller tiling. Elsewhere only the results are checked.
  std::vector<int> lens(64, 1024);
  for (int i = 0; i < 8; ++i) lens[size_t(i)] = std::vector<int>{0, 1, 4, 15, 16, 17, 513, 1000}[size_t(i)];
  DeviceCache d = make_device_cache(kBe, paged_spec(lens, 16, 8, 128));
  for (int sq : {1, 4}) {
    INFO("seqlen_q " << sq);
    DecodeOptions o = decode_options(0);
    if (sq > 1) o.mask = attention::causal_top_left();
    o.backend = kBe;
    attention::DecodePlan plan({.batch = 64, .heads_q = 32, .seqlen_q = sq}, d.cache, o);
    const int sms = device_info().sm_count;
    if (sms >= 128 && sms < 256) CHECK(plan.block_n() < 64);
    check_decode(kBe, d, 32, sq, o, sq > 1 ? ref_causal() : RefMods{});
  }
}

TEST_CASE("chunked prefill on the GPU", "[gpu][paged]") {
  check_paged_prefill(kBe, 128, 3000);
  check_paged_prefill_errors(kBe);
}

TEST_CASE("paged_kv_append on the GPU writes what decode reads", "[gpu][paged]") {
  // Pages start as random values unrelated to the model; appending every token (with skipped padding tokens)
  // must write exactly the model's values into the slots and nothing elsewhere.
  AppendFixture f = garbage_cache(kBe, paged_spec({0, 1, 15, 16, 17, 3000}, 16, 8, 128, PagedStrides::Padded));
  append_tokens(f, tools::append_batch(f.d.host, {}, {}, 9, rng()));
  require_pages(f);
  DecodeOptions o;
  o.mask = attention::causal_top_left();
  check_decode(kBe, f.d, 32, 1, o, ref_causal());
}

TEST_CASE("a decode step captured in a CUDA graph replays with new lengths, block tables and queries",
          "[gpu][paged][graph]") {
  // The cache's buffers keep their addresses; each draw rewrites their contents (the lengths change, the
  // pages are reshuffled, fresh values everywhere) and the queries, then replays the graph captured once.
  // Every draw fits the cache's pages (about 570).
  DeviceCache d = make_device_cache(kBe, paged_spec({9000, 40, 1, 17}, 16, 8, 128));
  for (int splits : {1, 0, 7}) {
    INFO("num_splits " << splits << " (0: automatic)");
    DecodeOptions o = decode_options(0, splits);
    o.mask = attention::causal_top_left();
    o.score_mod = attention::softcap(30.f);
    o.backend = kBe;
    attention::DecodePlan plan({.batch = 4, .heads_q = 32, .seqlen_q = 2, .max_seq_len = 9000}, d.cache, o);
    DecodeRun run = prepare_decode(kBe, d, 32, 2);
    Stream s;
    auto step = [&] { plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache, &s); };
    step();  // warm: nothing left to compile or load
    s.synchronize();
    CudaGraph graph(s, step);
    REQUIRE(graph.num_kernels() == (plan.num_splits() > 1 ? 2 : 1));
    RefMods ref = ref_causal();
    ref.score = [](double x, int, int, int, int) { return 30.0 * std::tanh(x / 30.0); };
    for (const std::vector<int> &lens : std::vector<std::vector<int>>{{2, 40, 33, 9000}, {100, 8000, 500, 40}, {17, 16, 15, 2}}) {
      INFO("lengths " << lens[0] << ", " << lens[1] << ", " << lens[2] << ", " << lens[3]);
      s.synchronize();  // the previous replay is done reading before the contents change
      redraw_device_cache(d, lens);
      run.q.values = random_values(run.layout.q_elements, d.host.dtype);
      run.q.buffer.upload(to_bits(run.q.values, d.host.dtype));
      run.out.fill_bytes(0xff);
      run.lse.fill_bytes(0xff);
      graph.replay(s);
      s.synchronize();
      require_paged_matches(decode_result(run, d, 32, 0.f, ref), d.host.dtype, run.layout, 32, 128);
    }
  }
}
