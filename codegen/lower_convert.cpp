// Shape manipulation: Splat, Broadcast and ExpandDims only re-index registers (the layout plan makes the
// operand's distribution line up); Trans and Reshape move data through shared memory (Lowering::redistribute).
#include <fmt/format.h>

#include "codegen/lowering.h"

namespace tilejit::codegen {

Tile lower_shape_op(Lowering &L, const ir::Op &op, const Layout *forced) {
  using K = ir::OpKind;
  const ir::Value *res = op.result(), *src = op.operand(0);
  if (res->type.is_scalar()) {  // e.g. reshape of a one-element tile to a scalar: every thread holds it
    const Tile &t = L.get(src);
    if (res->type.numel() != 1 && !t.is_scalar()) L.fail("internal: a scalar result from a tile of many elements");
    return Tile{std::nullopt, {t.regs[0]}};
  }
  const Layout &l = forced ? *forced : L.layout_of(res);
  switch (op.kind) {
    case K::Splat: {
      const Tile &t = L.get(src);
      if (!t.is_scalar()) L.fail("splat needs a scalar operand");
      return splat_tile(l, t.regs[0]);
    }
    case K::Broadcast: {
      Layout want = reshape_same_params(l, src->type.shape);
      Tile in = L.get_in(src, want);
      Tile out{l, {}};
      for (int64_t r = 0; r < l.num_regs(); ++r) {
        auto idx = l.reg_index(r);
        for (int i = 0; i < l.rank(); ++i) idx[size_t(i)] %= want.regs_along(i);
        out.regs.push_back(in.regs[size_t(want.reg_from_index(idx))]);
      }
      return out;
    }
    case K::ExpandDims: {
      int axis = int(op.attrs.axis);
      Layout want = slice_layout(l, axis);
      if (src->type.is_scalar()) return splat_tile(l, L.get(src).regs[0]);
      Tile in = L.get_in(src, want);
      Tile out{l, {}};
      for (int64_t r = 0; r < l.num_regs(); ++r) {
        auto idx = l.reg_index(r);
        idx.erase(idx.begin() + axis);
        out.regs.push_back(in.regs[size_t(want.reg_from_index(idx))]);
      }
      return out;
    }
    case K::Trans: {
      const Tile &t = L.get(src);
      if (t.is_scalar()) return splat_tile(l, t.regs[0]);
      const auto &perm = op.attrs.ints;
      if (int(perm.size()) != l.rank()) L.fail(fmt::format("permutation has {} entries for a rank-{} tile", perm.size(), l.rank()));
      auto src_strides = row_major_strides(src->type.shape);
      std::vector<int64_t> dst_strides(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) dst_strides[i] = src_strides[size_t(perm[i])];
      return L.redistribute(t, src->type.elem, l, src_strides, dst_strides);
    }
    case K::Reshape: {
      const Tile &t = L.get(src);
      if (t.is_scalar()) return splat_tile(l, t.regs[0]);
      return L.redistribute(t, src->type.elem, l, row_major_strides(src->type.shape), row_major_strides(res->type.shape));
    }
    default:
      L.fail("internal: not a shape op");
  }
}

}  // namespace tilejit::codegen
