// load, store, atomic_add: elementwise over a tile of pointers, with masks and bounds checks.
//
// Every lane whose mask is on (or every lane, without a mask) is checked before it touches memory: the
// address must be aligned to the element size and the whole element must lie inside the pointer argument
// it was derived from (its provenance, carried by every pointer tile: interp/tile.h). An argument of
// unknown size (bytes == 0) cannot be checked, so its addresses are accepted except in the first page; a
// null argument (address 0) is never accessible, whatever the offset. Addresses without provenance (cast
// from integers) must lie inside some argument of known size, or anywhere outside the first page when
// some non-null argument has an unknown size.
// Lanes whose mask is off never touch memory; load gives `other` there (0 without it), atomic_add 0.
// Memory holds the pointee dtype: f16/bf16 as their 16-bit patterns, i1 as one byte (nonzero reads as 1).
#include <fmt/format.h>

#include <cstring>

#include "interp/frame.h"
#include "interp/numerics.h"

namespace tilejit::interp {
namespace {

using K = ir::OpKind;

template <class T> T load_raw(uint64_t addr) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void *>(addr), sizeof v);
  return v;
}
template <class T> void store_raw(uint64_t addr, T v) {
  std::memcpy(reinterpret_cast<void *>(addr), &v, sizeof v);
}

double read_float(uint64_t a, DType t) {
  switch (t) {
    case DType::f16: return f16_bits_to_float(load_raw<uint16_t>(a));
    case DType::bf16: return bf16_bits_to_float(load_raw<uint16_t>(a));
    case DType::f32: return load_raw<float>(a);
    default: return load_raw<double>(a);
  }
}
void write_float(uint64_t a, DType t, double v) {
  switch (t) {
    case DType::f16: return store_raw(a, double_to_f16_bits(v));
    case DType::bf16: return store_raw(a, double_to_bf16_bits(v));
    case DType::f32: return store_raw(a, float(v));
    default: return store_raw(a, v);
  }
}
int64_t read_int(uint64_t a, DType t) {
  switch (t) {
    case DType::i1: return load_raw<uint8_t>(a) != 0;
    case DType::i8: return load_raw<int8_t>(a);
    case DType::i16: return load_raw<int16_t>(a);
    case DType::i32: return load_raw<int32_t>(a);
    default: return load_raw<int64_t>(a);
  }
}
void write_int(uint64_t a, DType t, int64_t v) {
  switch (t) {
    case DType::i1: return store_raw(a, uint8_t(v & 1));
    case DType::i8: return store_raw(a, int8_t(v));
    case DType::i16: return store_raw(a, int16_t(v));
    case DType::i32: return store_raw(a, int32_t(v));
    default: return store_raw(a, v);
  }
}

constexpr uint64_t kNullPage = 4096;

class Checker {
 public:
  Checker(Frame &fr, const Instr &in, const ir::Type &ptr_type, const Tile &ptrs)
      : fr_(fr), in_(in), shape_(ptr_type.shape), bytes_(uint64_t(dtype_bytes(ptr_type.dtype()))) {
    if (!ptrs.prov.empty()) {
      prov_ = ptrs.prov.data();
      prov_stride_ = ptrs.prov.size() == 1 ? 0 : 1;
    }
  }

  void check(uint64_t addr, int64_t k) {
    if (addr % bytes_ != 0)
      fail("misaligned access", k, fmt::format("address {:#x} is not aligned to the {}-byte element size", addr, bytes_));
    const int32_t p = prov_[k * prov_stride_];
    if (p >= 0 && size_t(p) < fr_.args.size()) return check_own(fr_.args[size_t(p)], addr, k);
    check_union(addr, k);
  }

 private:
  /// An address derived from argument r: it must stay inside r (when r's size is known).
  void check_own(const ArgRange &r, uint64_t addr, int64_t k) const {
    if (r.lo == 0)
      fail("null pointer access", k, fmt::format("address {:#x} is a null pointer plus an offset: {} is a "
                                                 "null pointer", addr, r.label()));
    if (r.bytes == 0) {  // unknown size: cannot be checked, but the null page is never valid
      if (addr < kNullPage) fail_null_page(addr, k);
      return;
    }
    if (inside(r, addr)) return;
    explain_against(r, addr, k);
  }
  /// An address without provenance (cast from an integer): any known argument may hold it.
  void check_union(uint64_t addr, int64_t k) {
    if (last_ && inside(*last_, addr)) return;
    for (const ArgRange &r : fr_.ranges)
      if (inside(r, addr)) {
        last_ = &r;
        return;
      }
    if (fr_.has_unchecked_ptr && addr >= kNullPage) return;
    explain_union(addr, k);
  }
  bool inside(const ArgRange &r, uint64_t addr) const {
    return addr >= r.lo && r.bytes >= bytes_ && addr - r.lo <= r.bytes - bytes_;
  }
  [[noreturn]] void fail(const char *kind, int64_t k, const std::string &why) const {
    fr_.fail(in_, fmt::format("{} at element {} of the {} tile: {}", kind, element_index_str(shape_, k),
                              ir::shape_str(shape_), why));
  }
  [[noreturn]] void fail_null_page(uint64_t addr, int64_t k) const {
    fail("null pointer access", k, fmt::format("address {:#x} is a null pointer plus an offset", addr));
  }
  /// How far outside argument r the access is.
  [[noreturn]] void explain_against(const ArgRange &r, uint64_t addr, int64_t k) const {
    const char *oob = "out-of-bounds access";
    const uint64_t end = r.lo + r.bytes;
    if (addr < r.lo)
      fail(oob, k, fmt::format("address {:#x} is {} bytes before the start of {} ({} bytes)", addr,
                               r.lo - addr, r.label(), r.bytes));
    if (addr >= end)
      fail(oob, k, fmt::format("address {:#x} is {} bytes past the end of {} ({} bytes)", addr, addr - end,
                               r.label(), r.bytes));
    fail(oob, k, fmt::format("address {:#x} starts {} bytes before the end of {} ({} bytes) but the "
                             "element is {} bytes long",
                             addr, end - addr, r.label(), r.bytes, bytes_));
  }
  /// Names the argument nearest below the address (or the lowest one) and how far off the access is.
  [[noreturn]] void explain_union(uint64_t addr, int64_t k) const {
    if (addr < kNullPage) fail_null_page(addr, k);
    const ArgRange *below = nullptr, *lowest = nullptr;
    for (const ArgRange &r : fr_.ranges) {
      if (r.lo <= addr && (!below || r.lo > below->lo)) below = &r;
      if (!lowest || r.lo < lowest->lo) lowest = &r;
    }
    if (below) explain_against(*below, addr, k);
    if (lowest) explain_against(*lowest, addr, k);
    fail("out-of-bounds access", k, fmt::format("address {:#x} is not inside any pointer argument", addr));
  }

  static constexpr int32_t kNone = kNoProvenance;
  Frame &fr_;
  const Instr &in_;
  const std::vector<int64_t> &shape_;
  uint64_t bytes_;
  const int32_t *prov_ = &kNone;
  int64_t prov_stride_ = 0;
  const ArgRange *last_ = nullptr;  // most accesses of a tile hit the same argument
};

/// Operand data with stride 0 for a one-element operand.
template <class T> struct Src {
  const T *p = nullptr;
  int64_t stride = 0;
  T operator[](int64_t k) const { return p[k * stride]; }
};

struct MemCtx {
  Frame &fr;
  const Instr &in;
  int64_t n;
  template <class T> Src<T> src(int operand, const std::vector<T> &(*pick)(const Tile &)) const {
    const ir::Type &t = fr.type(in.in[size_t(operand)]);
    if (t.numel() != n && t.numel() != 1)
      fr.fail(in, fmt::format("operand {} has type {} but the pointer tile has {} elements (invalid IR)", operand,
                              t.str(), n));
    const auto &v = pick(fr.at(in.in[size_t(operand)]));
    return {v.data(), v.size() == 1 ? 0 : 1};
  }
};
const std::vector<int64_t> &pick_i(const Tile &t) { return t.i; }
const std::vector<double> &pick_f(const Tile &t) { return t.f; }

void exec_load(Frame &fr, const Instr &in) {
  const ir::Type &pt = fr.type(in.in[0]);
  const DType dt = pt.dtype();
  const MemCtx c{fr, in, pt.numel()};
  const auto ptr = c.src<int64_t>(0, pick_i);
  const bool masked = in.in.size() >= 2, has_other = in.in.size() >= 3;
  const Src<int64_t> mask = masked ? c.src<int64_t>(1, pick_i) : Src<int64_t>{};
  Checker chk(fr, in, pt, fr.at(in.in[0]));
  Tile &o = fr.at(in.out[0]);
  const auto n = size_t(c.n);
  if (is_float(dt)) {
    const Src<double> other = has_other ? c.src<double>(2, pick_f) : Src<double>{};
    o.f.resize(n);
    for (int64_t k = 0; k < c.n; ++k) {
      if (masked && !mask[k]) {
        o.f[size_t(k)] = has_other ? other[k] : 0.0;
        continue;
      }
      const auto a = uint64_t(ptr[k]);
      chk.check(a, k);
      o.f[size_t(k)] = read_float(a, dt);
    }
  } else {
    const Src<int64_t> other = has_other ? c.src<int64_t>(2, pick_i) : Src<int64_t>{};
    o.i.resize(n);
    for (int64_t k = 0; k < c.n; ++k) {
      if (masked && !mask[k]) {
        o.i[size_t(k)] = has_other ? other[k] : 0;
        continue;
      }
      const auto a = uint64_t(ptr[k]);
      chk.check(a, k);
      o.i[size_t(k)] = read_int(a, dt);
    }
  }
}

/// store (atomic = false) and atomic_add (atomic = true, returns the old values).
void exec_store(Frame &fr, const Instr &in, bool atomic) {
  const ir::Type &pt = fr.type(in.in[0]);
  const DType dt = pt.dtype();
  const MemCtx c{fr, in, pt.numel()};
  const auto ptr = c.src<int64_t>(0, pick_i);
  const bool masked = in.in.size() >= 3;
  const Src<int64_t> mask = masked ? c.src<int64_t>(2, pick_i) : Src<int64_t>{};
  Checker chk(fr, in, pt, fr.at(in.in[0]));
  Tile *old = atomic ? &fr.at(in.out.at(0)) : nullptr;
  const auto n = size_t(c.n);
  if (is_float(dt)) {
    const auto val = c.src<double>(1, pick_f);
    if (old) old->f.assign(n, 0.0);
    for (int64_t k = 0; k < c.n; ++k) {
      if (masked && !mask[k]) continue;
      const auto a = uint64_t(ptr[k]);
      chk.check(a, k);
      double v = val[k];
      if (old) {
        const double prev = read_float(a, dt);
        old->f[size_t(k)] = prev;
        v = round_float(prev + v, dt);
      }
      write_float(a, dt, v);
    }
  } else {
    const auto val = c.src<int64_t>(1, pick_i);
    if (old) old->i.assign(n, 0);
    for (int64_t k = 0; k < c.n; ++k) {
      if (masked && !mask[k]) continue;
      const auto a = uint64_t(ptr[k]);
      chk.check(a, k);
      int64_t v = val[k];
      if (old) {
        const int64_t prev = read_int(a, dt);
        old->i[size_t(k)] = prev;
        v = wrap_int(int64_t(uint64_t(prev) + uint64_t(v)), dt);
      }
      write_int(a, dt, v);
    }
  }
}

}  // namespace

void exec_memory(Frame &fr, const Instr &in) {
  switch (in.kind) {
    case K::Load: return exec_load(fr, in);
    case K::Store: return exec_store(fr, in, false);
    default: return exec_store(fr, in, true);
  }
}

}  // namespace tilejit::interp
