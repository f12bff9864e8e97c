// The band a mask function implies (kernels/flex/mask_band.cpp): read from the function's own IR, so that a
// causal mask or a sliding window written as a lambda skips the blocks outside it as the built-in band does.
#include <catch2/catch.hpp>

#include <climits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kernels/flex/flex_internal.h"
#include "tilejit/capture.h"
#include "tilejit/flex_attention.h"
#include "tilejit/ops.h"

using namespace tilejit;
using attention::Band;
using attention::MaskFn;

namespace {
std::optional<Band> band_of(const MaskFn &fn) { return attention::flex::with_implied_band(attention::Mask(fn)).band; }
void require_band(const MaskFn &fn, int64_t left, int64_t right) {
  std::optional<Band> b = band_of(fn);
  REQUIRE(b.has_value());
  CHECK(b->left == left);
  CHECK(b->right == right);
  CHECK(b->align == attention::Align::TopLeft);  // in the positions the function sees
}
}  // namespace

TEST_CASE("flex: a mask function's implied band", "[flex]") {
  SECTION("causal and windows, in the forms users write them") {
    require_band([](Tile, Tile, Tile q, Tile kv) { return kv <= q; }, -1, 0);
    require_band([](Tile, Tile, Tile q, Tile kv) { return q >= kv; }, -1, 0);
    require_band([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (q - kv < 4096); }, 4095, 0);
    require_band([](Tile, Tile, Tile q, Tile kv) { return (kv >= q - 7) & (kv <= q + 3); }, 7, 3);
    require_band([](Tile, Tile, Tile q, Tile kv) { return abs(q - kv) <= 5 & (kv - q <= 2); }, -1, 2);
    require_band([](Tile, Tile, Tile q, Tile kv) { return kv == q + 2; }, -1, 2);  // left would be −2
    // A conjunct the band cannot hold (a document) stays the function's; the band still bounds the rest.
    require_band([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & ((q / 24) == (kv / 24)); }, -1, 0);
  }
  SECTION("a window captured as an integer follows its value at each call") {
    Captured w = capture(int32_t(9));
    MaskFn fn = [w](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (q - kv <= w()); };
    require_band(fn, 9, 0);
    w.set_int(100);
    require_band(fn, 100, 0);
    w.set_int(-3);  // q − kv ≤ −3 with kv ≤ q: nothing visible; the band can only be left unbounded
    require_band(fn, -1, 0);
  }
  SECTION("no band where none is implied") {
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return (q / 24) == (kv / 24); }));
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return (kv <= q) | (kv < 5); }));  // an OR: prefix-LM
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return kv < q; }));  // strictly below: not expressible
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return 2 * kv <= q; }));  // not a diagonal band
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return !(kv > q); }));    // a negation is not followed
    Captured w = capture(int32_t(4));
    CHECK_FALSE(band_of([w](Tile, Tile, Tile q, Tile kv) { return q - kv <= 2 * w(); }));  // coefficient 2
    Captured f = capture(4.f);
    CHECK_FALSE(band_of([f](Tile, Tile, Tile q, Tile kv) { return (q - kv).to(DType::f32) <= f(); }));
  }
  SECTION("nothing that i32 wraparound or token offsets could make true outside the band") {
    Captured off = capture(int32_t(5));
    MaskFn shifted = [off](Tile, Tile, Tile q, Tile kv) { return kv + off() <= q + off(); };
    require_band(shifted, -1, 0);
    off.set_int(INT32_MAX - 3);  // kv + off wraps: true for kv > q
    CHECK_FALSE(band_of(shifted));
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) { return q + kv <= q + q; }));  // q + kv may pass 2^31
    // Token indices add each sequence's offset in the packed tensors, which differ between q and k.
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) {
      return attention::mod_k_token(kv) <= attention::mod_q_token(q);
    }));
  }
  SECTION("a function that cannot run on scalar positions implies nothing and raises nothing") {
    CHECK_FALSE(band_of([](Tile, Tile, Tile q, Tile kv) -> Tile {
      if (q.rank() != 2) throw std::runtime_error("2-D positions only");
      return kv <= q;
    }));
  }
  SECTION("a block mask the caller made is taken with the mask as given") {
    attention::Mask m([](Tile, Tile, Tile q, Tile kv) { return kv <= q; });
    attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 16};
    attention::FlexOptions o;
    o.mask = m;
    o.block_m = o.block_n = 16;
    o.backend = Backend::Interpreter;
    attention::BlockMask bm = attention::create_block_mask(m, s, o);
    CHECK_FALSE(bm.band.has_value());
    o.block_mask = &bm;
    const size_t elems = size_t(2 * 40 * 16);
    std::vector<uint16_t> ones(elems, 0x3f80);  // bf16 1.0
    Buffer q(elems * 2, Backend::Interpreter), k(elems * 2, Backend::Interpreter), v(elems * 2, Backend::Interpreter),
        out(elems * 2, Backend::Interpreter), lse(2 * 40 * 4, Backend::Interpreter);
    for (Buffer *b : {&q, &k, &v}) b->upload(ones);
    CHECK_NOTHROW(attention::flex_forward(q, k, v, out, lse, s, o));
  }
  SECTION("a mask's own band is kept as given") {
    attention::Mask m([](Tile, Tile, Tile q, Tile kv) { return kv <= q; });
    m.band = Band{3, -1, attention::Align::BottomRight};
    std::optional<Band> b = attention::flex::with_implied_band(m).band;
    REQUIRE(b.has_value());
    CHECK(b->left == 3);
    CHECK(b->right == -1);
    CHECK(b->align == attention::Align::BottomRight);
  }
}
