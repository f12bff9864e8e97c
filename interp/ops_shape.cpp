// Source ops (constant, program ids, arange) and shape ops (splat, broadcast, expand_dims, reshape, trans).
// Shape ops move elements without changing their values, so they work on either storage vector; pointer
// tiles move their provenance along (a one-entry provenance stays one entry: it covers every element).
#include <fmt/format.h>

#include "interp/frame.h"
#include "interp/numerics.h"

namespace tilejit::interp {
namespace {

using K = ir::OpKind;

/// Row-major strides of `shape` in elements.
std::vector<int64_t> strides_of(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

/// out[k] = src[sum_d idx_d(k) * strides[d]] for every k of a row-major tile of `shape`. Walks the index
/// like an odometer so the innermost dimension is a tight loop.
template <class T>
void gather(const std::vector<T> &src, const std::vector<int64_t> &shape, const std::vector<int64_t> &strides,
            std::vector<T> &out) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  out.resize(size_t(n));
  if (shape.empty()) {
    out[0] = src[0];
    return;
  }
  const size_t rank = shape.size();
  const int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t base = 0;  // source offset of idx with the innermost index 0
  for (int64_t k = 0; k < n; k += inner) {
    for (int64_t j = 0; j < inner; ++j) out[size_t(k + j)] = src[size_t(base + j * inner_stride)];
    for (size_t d = rank - 1; d-- > 0;) {  // advance the outer dimensions
      base += strides[d];
      if (++idx[d] < shape[d]) break;
      base -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

void gather_tile(const Tile &src, bool f, const std::vector<int64_t> &shape, const std::vector<int64_t> &strides,
                 Tile &out, bool ptr) {
  if (f) gather(src.f, shape, strides, out.f);
  else gather(src.i, shape, strides, out.i);
  if (!ptr) return;
  if (src.prov.size() == src.i.size() && src.prov.size() > 1) gather(src.prov, shape, strides, out.prov);
  else out.prov.assign(1, src.prov.empty() ? kNoProvenance : src.prov[0]);
}

void exec_constant(Frame &fr, const Instr &in) {
  const ir::Type &t = fr.type(in.out[0]);
  Tile &o = fr.at(in.out[0]);
  const auto n = size_t(t.numel());
  if (stores_float(t)) o.f.assign(n, round_float(in.op->attrs.fvalue, t.dtype()));
  else o.i.assign(n, t.is_ptr() ? in.op->attrs.ivalue : wrap_int(in.op->attrs.ivalue, t.dtype()));
  if (t.is_ptr()) o.prov.assign(1, kNoProvenance);  // a literal address belongs to no argument
}

void exec_program_id(Frame &fr, const Instr &in) {
  const int64_t axis = in.op->attrs.axis;
  if (axis < 0 || axis > 2) fr.fail(in, fmt::format("axis {} is not 0, 1 or 2", axis));
  const uint32_t grid[3] = {fr.grid.x, fr.grid.y, fr.grid.z};
  const int64_t v = in.kind == K::ProgramId ? fr.pid[size_t(axis)] : grid[axis];
  fr.at(in.out[0]).i.assign(1, wrap_int(v, fr.type(in.out[0]).dtype()));
}

void exec_arange(Frame &fr, const Instr &in) {
  const auto &r = in.op->attrs.ints;
  const ir::Type &t = fr.type(in.out[0]);
  if (r.size() != 2 || r[1] - r[0] != t.numel())
    fr.fail(in, fmt::format("range attribute does not match the result type {} (invalid IR)", t.str()));
  auto &o = fr.at(in.out[0]).i;
  o.resize(size_t(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) o[size_t(k)] = wrap_int(r[0] + k, t.dtype());
}

void exec_broadcast(Frame &fr, const Instr &in) {
  const ir::Type &st = fr.type(in.in[0]), &rt = fr.type(in.out[0]);
  if (st.rank() != rt.rank())
    fr.fail(in, fmt::format("cannot broadcast {} to {}: ranks differ (invalid IR)", st.str(), rt.str()));
  auto strides = strides_of(st.shape);
  for (int d = 0; d < rt.rank(); ++d) {
    if (st.shape[size_t(d)] == 1) strides[size_t(d)] = 0;
    else if (st.shape[size_t(d)] != rt.shape[size_t(d)])
      fr.fail(in, fmt::format("cannot broadcast {} to {}: dimension {} is neither 1 nor equal (invalid IR)",
                              st.str(), rt.str(), d));
  }
  gather_tile(fr.at(in.in[0]), stores_float(st), rt.shape, strides, fr.at(in.out[0]), st.is_ptr());
}

void exec_trans(Frame &fr, const Instr &in) {
  const ir::Type &st = fr.type(in.in[0]), &rt = fr.type(in.out[0]);
  const auto &perm = in.op->attrs.ints;
  if (perm.size() != size_t(st.rank()))
    fr.fail(in, fmt::format("permutation has {} entries for a rank-{} tile (invalid IR)", perm.size(), st.rank()));
  const auto src_strides = strides_of(st.shape);
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= st.rank() || st.shape[size_t(perm[d])] != rt.shape[d])
      fr.fail(in, fmt::format("permutation entry {} = {} does not map {} to {} (invalid IR)", d, perm[d], st.str(),
                              rt.str()));
    strides[d] = src_strides[size_t(perm[d])];
  }
  gather_tile(fr.at(in.in[0]), stores_float(st), rt.shape, strides, fr.at(in.out[0]), st.is_ptr());
}

/// Splat, expand_dims and reshape keep the row-major element order: a copy (a fill for splat).
void exec_copy(Frame &fr, const Instr &in) {
  const ir::Type &st = fr.type(in.in[0]), &rt = fr.type(in.out[0]);
  const Tile &s = fr.at(in.in[0]);
  Tile &o = fr.at(in.out[0]);
  const auto n = size_t(rt.numel());
  if (in.kind == K::Splat ? st.numel() != 1 : st.numel() != rt.numel())
    fr.fail(in, fmt::format("cannot turn {} into {} (invalid IR)", st.str(), rt.str()));
  if (stores_float(st)) {
    if (in.kind == K::Splat) o.f.assign(n, s.f[0]);
    else o.f.assign(s.f.begin(), s.f.end());
  } else {
    if (in.kind == K::Splat) o.i.assign(n, s.i[0]);
    else o.i.assign(s.i.begin(), s.i.end());
    if (st.is_ptr()) {
      if (in.kind == K::Splat || s.prov.size() != s.i.size()) o.prov.assign(1, s.prov.empty() ? kNoProvenance : s.prov[0]);
      else o.prov.assign(s.prov.begin(), s.prov.end());
    }
  }
}

}  // namespace

void exec_shape(Frame &fr, const Instr &in) {
  switch (in.kind) {
    case K::Constant: return exec_constant(fr, in);
    case K::ProgramId: case K::NumPrograms: return exec_program_id(fr, in);
    case K::Arange: return exec_arange(fr, in);
    case K::Broadcast: return exec_broadcast(fr, in);
    case K::Trans: return exec_trans(fr, in);
    default: return exec_copy(fr, in);
  }
}

}  // namespace tilejit::interp
