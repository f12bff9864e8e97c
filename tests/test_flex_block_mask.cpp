// Block masks built for only the batches / heads a mask depends on (read from its traced IR), kept between
// calls when the mask reads no memory, and the two build kernels' generated code run on the CPU simulator.
#include <catch2/catch.hpp>

#include "flex_block_mask_checks.h"
#include "sim_lli.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::testing;
using attention::Mask;
using attention::flex::analyze_mask;

TEST_CASE("flex: a mask's dependence on b and h is read from its traced IR", "[flex][block_mask]") {
  auto ids = capture(DevicePtr{256, 4096}, DType::i32);
  auto width = capture(int32_t(8));
  struct Expect {
    const char *name;
    attention::MaskFn fn;
    bool b, h, memory;
    size_t captures;
  };
  std::vector<Expect> cases{
      {"window", [](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (kv >= q - 256); }, false, false, false, 0},
      {"window from a captured scalar", [width](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (kv >= q - width()); },
       false, false, false, 1},
      {"head only", [](Tile, Tile h, Tile q, Tile kv) { return kv <= q + h; }, false, true, false, 0},
      {"batch only", [](Tile b, Tile, Tile q, Tile kv) { return kv <= q + b; }, true, false, false, 0},
      {"both", [](Tile b, Tile h, Tile q, Tile kv) { return kv <= q + b * h; }, true, true, false, 0},
      // Reads b through the token index (b·seqlen + q) and loads from the captured buffer.
      {"documents", [ids](Tile, Tile, Tile q, Tile kv) {
         return load(ids() + attention::mod_q_token(q)) == load(ids() + attention::mod_k_token(kv));
       }, true, false, true, 1},
      // A per-token table shared by every batch: no b, but a load.
      {"shared table", [ids](Tile, Tile, Tile q, Tile kv) { return load(ids() + q) >= load(ids() + kv); }, false,
       false, true, 1},
      // An argument whose every use the optimizer removes does not count.
      {"b folded away", [](Tile b, Tile, Tile q, Tile kv) { return (kv <= q) | ((b - b) != 0); }, false, false, false, 0},
      // A capture used only in a term that folds away is not in the key.
      {"capture folded away", [width](Tile, Tile, Tile q, Tile kv) { return (kv <= q) | ((width() - width()) != 0); },
       false, false, false, 0},
      {"lengths", [](Tile, Tile, Tile q, Tile kv) { return kv <= q + (attention::mod_seqlen_k() - attention::mod_seqlen_q()); },
       false, false, false, 0},
  };
  for (const Expect &e : cases) {
    INFO(e.name);
    auto a = analyze_mask(e.fn, false);
    CHECK(a->reads_b == e.b);
    CHECK(a->reads_h == e.h);
    CHECK(a->reads_memory == e.memory);
    CHECK(a->captures.size() == e.captures);
    REQUIRE(analyze_mask(e.fn, false) == a);  // cached per function
  }
  // With varlen the lengths and token offsets are loaded per sequence: both depend on b.
  attention::MaskFn lengths = cases.back().fn;
  auto v = analyze_mask(lengths, true);
  CHECK(v->reads_b);
  CHECK(!v->reads_h);
  CHECK(v->reads_memory);
  CHECK(!analyze_mask(cases[0].fn, true)->reads_b);

  attention::MaskFn pid([](Tile, Tile, Tile q, Tile kv) { return kv <= q + program_id(1); });
  REQUIRE_THROWS_WITH(analyze_mask(pid, false), Catch::Contains("program_id()"));
  attention::MaskFn not_a_mask([](Tile, Tile, Tile q, Tile kv) { return q + kv; });
  REQUIRE_THROWS_WITH(analyze_mask(not_a_mask, false), Catch::Contains("must return i1"));
}

TEST_CASE("flex: masks independent of b / h match float64 and build lists only for what they read",
          "[flex][block_mask]") {
  check_mask_dependence(Backend::Interpreter,
                        {.batch = 2, .heads_q = 3, .seqlen_q = 75, .seqlen_k = 75, .head_dim_qk = 32}, DType::bf16, 16,
                        16);
  check_mask_dependence(Backend::Interpreter,
                        {.batch = 3, .heads_q = 2, .heads_kv = 1, .seqlen_q = 50, .seqlen_k = 50, .head_dim_qk = 16},
                        DType::f16, 32, 16);
}

TEST_CASE("flex: a block mask of a mask reading no memory is reused until what it was built from changes",
          "[flex][block_mask]") {
  check_mask_cache(Backend::Interpreter, DType::bf16, 16, 16);
}

TEST_CASE("flex: a mask reading a captured buffer is rebuilt on every call", "[flex][block_mask]") {
  check_mask_reads_buffer(Backend::Interpreter, DType::bf16, 16, 32);
}

TEST_CASE("flex: a block mask shared by batches / heads serves any count, a per-batch one must match",
          "[flex][block_mask]") {
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  o.block_m = o.block_n = 16;
  attention::FlexShape one{.batch = 1, .heads_q = 1, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16};
  Mask window([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (kv >= q - 5); });
  attention::BlockMask shared = attention::create_block_mask(window, one, o);
  CHECK(shared.shared_batches);
  CHECK(shared.shared_heads);
  CHECK(shared.counts.bytes() == 3 * 4);  // one list per query block
  FlexCase c = mask_case({.batch = 3, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16}, DType::bf16,
                         16, 16);
  o.mask = window;
  o.block_mask = &shared;
  Builds n = count_builds([&] {
    require_matches(run_flex_case(Backend::Interpreter, c, o,
                                  {{}, [](int, int, int q, int kv, int, int) { return kv <= q && kv >= q - 5; }}),
                    DType::bf16);
  });
  CHECK(n.builds == 0);

  Mask per_b([](Tile b, Tile, Tile q, Tile kv) { return kv <= q + b; });
  attention::BlockMask mine = attention::create_block_mask(per_b, one, o);
  CHECK(!mine.shared_batches);
  CHECK(mine.shared_heads);
  o.mask = per_b;
  o.block_mask = &mine;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}), Catch::Contains("made for batch 1"));
}

TEST_CASE("codegen simulated on the CPU: the block-mask kernels equal the interpreter", "[flex][block_mask][sim]") {
  // Depends on b, h, q, kv, with a band: empty, partial and full tiles, tiles outside the band skipped.
  Mask m([](Tile b, Tile h, Tile q, Tile kv) { return (kv <= q + b * 8) & (((kv / 16 + h) % 3 != 0) | (q > 30)); });
  m.band = attention::Band{40, 20};
  attention::FlexShape s{.batch = 2, .heads_q = 2, .seqlen_q = 45, .seqlen_k = 70, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.block_m = 16;
  o.block_n = 16;
  const int nqb = 3, nkb = 5, lists = 2 * 2 * nqb;
  const DevicePtr fake{256, 0};
  auto L = attention::flex::block_mask_launches(m, s, o, fake, fake, fake, 2, 2, nqb, nkb);
  auto scalars = [](const std::vector<detail::ArgValue> &a, std::initializer_list<int> idx) {
    std::vector<sim::SimArg> out;
    for (int i : idx) out.push_back(sim::i32(int32_t(a[size_t(i)].i)));
    return out;
  };
  using namespace attention::flex;
  std::vector<int> cu{0, 0, 0};
  std::vector<sim::SimArg> targs{sim::poisoned(size_t(lists) * nkb), sim::buffer(cu), sim::buffer(cu)};
  for (auto &a : scalars(L.tile_args, {tSeqlenQ, tSeqlenK, tNumQBlocks, tNumKBlocks, tBandLeft, tBandRight,
                                       tBandBottomRight}))
    targs.push_back(a);
  const ir::Function &tiles = L.tiles->function(L.tile_args);
  auto status = sim::run_interpreted(tiles, L.tile_grid, targs)[0];
  auto status_sim = sim::run_simulated(tiles, L.tile_grid, L.tile_cfg.num_warps, targs)[0];
  REQUIRE(status == status_sim);
  int partial = 0, full = 0, empty = 0;
  for (uint8_t st : status) {
    REQUIRE(st <= 2);  // every tile written
    (st == 0 ? empty : st == 1 ? partial : full)++;
  }
  CHECK(empty > 0);
  CHECK(partial > 0);
  CHECK(full > 0);

  std::vector<sim::SimArg> largs{sim::poisoned(size_t(lists) * nkb * 4), sim::poisoned(size_t(lists) * 4),
                                 sim::buffer(status), sim::buffer(cu), sim::buffer(cu)};
  for (auto &a : scalars(L.list_args, {lSeqlenQ, lSeqlenK, lNumQBlocks, lNumKBlocks})) largs.push_back(a);
  const ir::Function &compact = L.lists->function(L.list_args);
  auto interp = sim::run_interpreted(compact, L.list_grid, largs);
  auto simulated = sim::run_simulated(compact, L.list_grid, L.list_cfg.num_warps, largs);
  REQUIRE(interp[0] == simulated[0]);
  REQUIRE(interp[1] == simulated[1]);
  // The lists are the statuses in order: index·2 + full.
  std::vector<int32_t> kv(static_cast<size_t>(lists * nkb)), counts(static_cast<size_t>(lists));
  std::memcpy(kv.data(), interp[0].data(), interp[0].size());
  std::memcpy(counts.data(), interp[1].data(), interp[1].size());
  for (int row = 0; row < lists; ++row) {
    std::vector<int32_t> expect;
    for (int kb = 0; kb < nkb; ++kb)
      if (int st = status[size_t(row * nkb + kb)]; st) expect.push_back(kb * 2 + (st == 2));
    INFO("list " << row);
    REQUIRE(counts[size_t(row)] == int32_t(expect.size()));
    for (size_t i = 0; i < expect.size(); ++i) REQUIRE(kv[size_t(row * nkb) + i] == expect[i]);
  }
}

TEST_CASE("flex: a block mask made from another mask, or an empty one, is rejected", "[flex][block_mask]") {
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  o.block_m = o.block_n = 16;
  FlexCase c = mask_case({.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16}, DType::bf16,
                         16, 16);
  Mask a([](Tile, Tile, Tile q, Tile kv) { return kv <= q; });
  Mask b([](Tile, Tile, Tile q, Tile kv) { return kv >= q; });
  attention::BlockMask bm = attention::create_block_mask(a, c.shape, o);
  o.block_mask = &bm;
  o.mask = b;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}), Catch::Contains("another mask function"));
  o.mask = Mask();
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}), Catch::Contains("this call's mask has none"));
  o.mask = a;  // the same function (a copy shares it): accepted
  require_matches(run_flex_case(Backend::Interpreter, c, o, {{}, [](int, int, int q, int kv, int, int) { return kv <= q; }}),
                  DType::bf16);
  attention::FlexOptions huge = o;
  huge.block_m = 1 << 20;
  REQUIRE_THROWS_WITH(attention::create_block_mask(a, c.shape, huge), Catch::Contains("from 16 to 256"));
  attention::BlockMask moved = std::move(bm);
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}), Catch::Contains("block_mask is empty"));
}

TEST_CASE("flex: a mod or mask calling program_id() is rejected on every path", "[flex]") {
  FlexCase c = mask_case({.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16}, DType::bf16,
                         16, 16);
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  o.block_m = o.block_n = 16;
  o.mask = Mask([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) | (program_id(0) > 0); });
  o.block_mask_mode = attention::BlockMaskMode::Off;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}),
                      Catch::Contains("mask function calls program_id()"));
  o.block_mask_mode = attention::BlockMaskMode::Auto;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}),
                      Catch::Contains("mask function calls program_id()"));
  attention::FlexOptions m;
  m.backend = Backend::Interpreter;
  m.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return s + program_id(0).to(DType::f32); };
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, m, {}), Catch::Contains("score_mod calls program_id()"));
}

TEST_CASE("flex: a mod or mask mixing positions (trans, reshape, reductions, dot) is rejected, naming the op",
          "[flex]") {
  FlexCase c = mask_case({.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16}, DType::bf16,
                         16, 16);
  auto rejects = [&](attention::FlexOptions o, const std::string &op) {
    o.backend = Backend::Interpreter;
    o.block_m = o.block_n = 16;
    o.block_mask_mode = attention::BlockMaskMode::Off;
    std::string what;
    try {
      run_flex_case(Backend::Interpreter, c, o, {});
    } catch (const TraceError &e) {
      what = e.what();
    }
    INFO(what);
    CHECK(what.find("applies " + op + " at ") != std::string::npos);
    CHECK(what.find("across an axis that varies with the position") != std::string::npos);
    CHECK(what.find("test_flex_block_mask.cpp") != std::string::npos);
  };
  attention::FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return trans(s); };
  rejects(o, "trans");
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return s - expand_dims(max(s, 1), 1); };
  rejects(o, "reduce");
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return dot(s, s); };
  rejects(o, "dot");
  o.score_mod = {};
  o.mask = Mask([](Tile, Tile, Tile q, Tile kv) { return reshape(reshape(q >= kv, {256}), {16, 16}) | (kv == 0); });
  rejects(o, "reshape");
  // Control flow does not hide it: a value carried out of an if_ still varies with the position.
  o.mask = Mask();
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) {
    Tile t = zeros_like(s);
    if_(attention::mod_seqlen_q() > 0, [&] { t = s; });
    return s - expand_dims(max(t, 1), 1);
  };
  rejects(o, "reduce");
  // Accepted: reductions over an axis the mod added itself (a learned bias as the dot of per-position features),
  // a reshape that only adds an axis of 1, a reduction of a table indexed by the (scalar) head.
  std::vector<float> feats(8 * 64);
  for (size_t i = 0; i < feats.size(); ++i) feats[i] = 0.01f * float(int(i % 17) - 8);
  Buffer fb(feats.size() * 4, Backend::Interpreter);
  fb.upload(feats);
  auto feat = capture(fb, DType::f32);
  attention::FlexOptions ok;
  ok.backend = Backend::Interpreter;
  ok.block_m = ok.block_n = 16;
  ok.score_mod = [feat](Tile s, Tile, Tile h, Tile q, Tile kv) {
    Tile f = arange(0, 8);
    Tile fq = load(feat() + ((q & 63) * 8)(_, _, None) + f(None, None, _));    // [BM, 1, 8]
    Tile fk = load(feat() + ((kv & 63) * 8)(_, _, None) + f(None, None, _));   // [1, BN, 8]
    Tile head_bias = sum(load(feat() + h * 8 + f), 0);                          // scalar
    return s + sum(fq * fk, 2) + reshape(expand_dims(head_bias, 0), {1, 1}) * 0.f;
  };
  CHECK_NOTHROW(run_flex_case(Backend::Interpreter, c, ok, {}));
  // A reduction of values that do not depend on the position (a captured table's sum) is fine.
  std::vector<float> table{1, 2, 3, 4};
  Buffer tb(table.size() * 4, Backend::Interpreter);
  tb.upload(table);
  attention::FlexOptions fine;
  fine.backend = Backend::Interpreter;
  fine.score_mod = [t = capture(tb, DType::f32)](Tile s, Tile, Tile, Tile, Tile) {
    return s + sum(load(t() + arange(0, 4)), 0) * 0.f;
  };
  CHECK_NOTHROW(run_flex_case(Backend::Interpreter, c, fine, {}));
}
