// Pointer provenance in the interpreter: an access is checked against the range of the argument its pointer
// was derived from, so running off one buffer into an adjacent one is caught, an unknown-size argument does
// not switch off checks of the others, and a null argument is never accessible.
#include <catch2/catch.hpp>

#include <cstring>

#include "test_interp_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

namespace {



/// A view [off, off + bytes) of one host block: adjacent views model neighbouring allocations.
KernelArg view(const HostBuf &block, size_t off, size_t bytes) {
  KernelArg a = block.arg();
  a.ptr += off;
  a.bytes = bytes;
  return a;
}

/// Kernel: out[i] = x[i] for i in [0, B) (x: argument 0, out: argument 2; argument 1 is a bystander).
std::unique_ptr<KernelBuilder> copy_kernel(int64_t B) {
  auto kb = std::make_unique<KernelBuilder>();
  auto *px = kb->param("x", P(DType::f32));
  kb->param("y", P(DType::f32));
  auto *po = kb->param("out", P(DType::f32));
  auto *offs = kb->arange(0, B);
  kb->line = 40;
  kb->store(kb->ptrs(po, offs), kb->load(kb->ptrs(px, offs)));
  return kb;
}

}  // namespace

TEST_CASE("a load running past argument x into the adjacent argument y is caught and names x",
          "[interp][memory][provenance]") {
  Rng rng;
  INFO("seed " << rng.seed);
  const auto data = rng.floats(128);
  HostBuf block = HostBuf::of(data), out(128 * 4);
  const KernelArg x = view(block, 0, 256), y = view(block, 256, 256);
  // In bounds: the copy is exact.
  auto ok = copy_kernel(64);
  interp::run(ok->fn, Grid{}, {x, y, out.arg()});
  const auto got = out.as<float>();
  CHECK(std::vector<float>(got.begin(), got.begin() + 64) == std::vector<float>(data.begin(), data.begin() + 64));
  // Lane 64 reads y's first element through x: an error, though the address is valid memory of y.
  auto bad = copy_kernel(128);
  const std::string m = interp_error(bad->fn, Grid{}, {x, y, out.arg()});
  INFO(m);
  CHECK_THAT(m, Catch::StartsWith("load at kernels/x.cpp:40: out-of-bounds access at element [64] of the 128 tile"));
  CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('x') (256 bytes)"));
}

TEST_CASE("an argument of unknown size does not switch off the checks of the others", "[interp][memory][provenance]") {
  HostBuf xs(256), ys(1024), out(128 * 4);
  // y has bytes == 0 (a raw pointer): x is still checked.
  auto bad = copy_kernel(128);
  std::string m = interp_error(bad->fn, Grid{}, {xs.arg(), ys.arg(false), out.arg()});
  INFO(m);
  CHECK_THAT(m, Catch::Contains("element [64]"));
  CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('x') (256 bytes)"));
  // A null unknown-size bystander does not either.
  KernelArg null_arg;
  null_arg.kind = KernelArg::Kind::Ptr;
  m = interp_error(bad->fn, Grid{}, {xs.arg(), null_arg, out.arg()});
  CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('x') (256 bytes)"));
  // The unknown-size argument itself stays unchecked: reading 128 floats through it works.
  auto via_y = copy_kernel(128);
  ys.bytes.assign(ys.bytes.size(), 0);
  std::vector<float> src(256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.5f;
  HostBuf big = HostBuf::of(src);
  CHECK_NOTHROW(interp::run(via_y->fn, Grid{}, {big.arg(false), xs.arg(), out.arg()}));
  CHECK(out.as<float>() == std::vector<float>(src.begin(), src.begin() + 128));
}

TEST_CASE("a null argument is an error at any offset, and DevicePtr{0, 64} is not valid memory",
          "[interp][memory][provenance]") {
  HostBuf other(64 * 1024);
  auto make = [](int64_t elem_off) {
    auto kb = std::make_unique<KernelBuilder>();
    auto *p = kb->param("p", P(DType::f32));
    kb->param("q", P(DType::f32));
    kb->store(kb->op(K::PtrAdd, {p, kb->const_i(elem_off, s32())}, P(DType::f32)), kb->const_f(1.0, T({}, DType::f32)));
    return kb;
  };
  KernelArg null_arg;
  null_arg.kind = KernelArg::Kind::Ptr;
  auto far = make(2048);  // null + 8192 bytes: past the first page
  std::string m = interp_error(far->fn, Grid{}, {null_arg, other.arg(false)});
  INFO(m);
  CHECK_THAT(m, Catch::Contains("null pointer access at element []"));
  CHECK_THAT(m, Catch::Contains("address 0x2000 is a null pointer plus an offset: argument 0 ('p') is a null pointer"));
  KernelArg sized_null = null_arg;
  sized_null.bytes = 64;
  auto at0 = make(0);
  m = interp_error(at0->fn, Grid{}, {sized_null, other.arg()});
  CHECK_THAT(m, Catch::Contains("argument 0 ('p') is a null pointer"));
}

TEST_CASE("select between two pointer arguments checks each lane against the argument it picked",
          "[interp][memory][provenance]") {
  Rng rng;
  INFO("seed " << rng.seed);
  // One block: y = bytes [0, 128) (32 floats), x = bytes [128, 384) (64 floats). y + 33 lies inside x.
  const auto data = rng.floats(96);
  HostBuf block = HostBuf::of(data), out(64 * 4);
  const KernelArg y = view(block, 0, 128), x = view(block, 128, 256);
  auto make = [](int64_t B) {
    auto kb = std::make_unique<KernelBuilder>();
    auto *px = kb->param("x", P(DType::f32));
    auto *py = kb->param("y", P(DType::f32));
    auto *po = kb->param("out", P(DType::f32));
    auto *lane = kb->arange(0, B);
    auto tb = T({B}, DType::i32);
    auto *even = kb->cmp(ir::CmpPred::eq, kb->op(K::Rem, {lane, kb->const_i(2, tb)}, tb), kb->const_i(0, tb));
    auto *p = kb->op(K::Select, {even, kb->ptrs(px, lane), kb->ptrs(py, lane)}, P(DType::f32, {B}));
    kb->store(kb->ptrs(po, lane), kb->load(p));
    return kb;
  };
  auto ok = make(32);
  interp::run(ok->fn, Grid{}, {x, y, out.arg()});
  const auto got = out.as<float>();
  for (size_t i = 0; i < 32; ++i) REQUIRE(got[i] == (i % 2 == 0 ? data[32 + i] : data[i]));
  // Lane 33 is odd (y), 4 bytes past y's end; lane 34 (x + 34) is fine.
  auto bad = make(64);
  const std::string m = interp_error(bad->fn, Grid{}, {x, y, out.arg()});
  INFO(m);
  CHECK_THAT(m, Catch::Contains("out-of-bounds access at element [33] of the 64 tile"));
  CHECK_THAT(m, Catch::Contains("is 4 bytes past the end of argument 1 ('y') (128 bytes)"));
}

TEST_CASE("a loop-carried pointer advanced past its argument's end is caught", "[interp][memory][provenance]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t B = 16;
  // x = 64 floats followed directly by y = 64 floats in one block.
  const auto data = rng.floats(128);
  HostBuf block = HostBuf::of(data), out(B * 4);
  const KernelArg x = view(block, 0, 256), y = view(block, 256, 256);
  KernelBuilder kb;
  auto *px = kb.param("x", P(DType::f32));
  kb.param("y", P(DType::f32));
  auto *po = kb.param("out", P(DType::f32));
  auto *pn = kb.param("n", s32());
  auto tb = T({B}, DType::i32);
  auto *lane = kb.arange(0, B);
  auto *p0 = kb.ptrs(px, lane);
  auto *acc0 = kb.const_f(0.0, T({B}, DType::f32));
  std::vector<ir::Value *> operands{kb.const_i(0, s32()), pn, kb.const_i(1, s32()), p0, acc0};
  ir::Op *f = kb.b.create(K::For, operands, {p0->type, acc0->type}, {}, kb.loc());
  ir::Block *region = f->region(0);
  region->add_arg(s32());
  auto *p = region->add_arg(p0->type);
  auto *acc = region->add_arg(acc0->type);
  auto *outer = const_cast<ir::Block *>(kb.b.block());
  const size_t pos = kb.b.position();
  kb.b.set_insertion_point_to_end(region);
  kb.line = 90;
  auto *sum = kb.op(K::Add, {acc, kb.load(p)}, acc0->type);
  kb.line = 91;
  auto *next = kb.op(K::PtrAdd, {p, kb.const_i(B, tb)}, p0->type);
  kb.b.create(K::Yield, {next, sum}, {}, {}, kb.loc());
  kb.b.set_insertion_point(outer, pos);
  kb.store(kb.ptrs(po, lane), f->result(1));
  // Four trips read exactly x.
  interp::run(kb.fn, Grid{}, {x, y, out.arg(), int_arg(4)});
  std::vector<float> ref(B, 0.0f);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t j = 0; j < B; ++j) ref[size_t(j)] += data[size_t(t * B + j)];
  CHECK(out.as<float>() == ref);
  // A fifth trip would read y's memory through x.
  const std::string m = interp_error(kb.fn, Grid{}, {x, y, out.arg(), int_arg(5)});
  INFO(m);
  CHECK_THAT(m, Catch::StartsWith("load at kernels/x.cpp:90: out-of-bounds access at element [0] of the 16 tile"));
  CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('x') (256 bytes)"));
}

TEST_CASE("misaligned accesses say so, integer-cast pointers are checked against every argument",
          "[interp][memory][provenance]") {
  HostBuf a(64), b(64);
  KernelBuilder kb;
  auto *pa = kb.param("a", P(DType::f32));
  kb.param("b", P(DType::f32));
  auto *addr = kb.param("addr", T({}, DType::i64));
  auto *p = kb.op(K::Cast, {addr}, P(DType::f32));
  kb.store(p, kb.load(pa));
  // An address inside b (no provenance) is accepted; one just past b is not; a misaligned one says so.
  CHECK_NOTHROW(interp::run(kb.fn, Grid{}, {a.arg(), b.arg(), int_arg(int64_t(b.addr() + 60))}));
  std::string m = interp_error(kb.fn, Grid{}, {a.arg(), b.arg(), int_arg(int64_t(b.addr() + 64))});
  CHECK_THAT(m, Catch::Contains("out-of-bounds access"));
  m = interp_error(kb.fn, Grid{}, {a.arg(), b.arg(), int_arg(int64_t(b.addr() + 2))});
  CHECK_THAT(m, Catch::Contains("misaligned access at element []"));
  CHECK_THAT(m, Catch::Contains("is not aligned to the 4-byte element size"));
}
