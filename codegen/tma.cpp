// Which loads a tensor map can copy (codegen/tma.h).
#include "codegen/tma.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "codegen/software_pipeline.h"

namespace tilejit::codegen {

std::optional<int64_t> LaunchValue::at(const std::vector<KernelArg> &args) const {
  int64_t v = factor;
  for (int p : params) {
    if (p < 0 || size_t(p) >= args.size() || args[size_t(p)].kind != KernelArg::Kind::Int) return std::nullopt;
    if (__builtin_mul_overflow(v, args[size_t(p)].i, &v)) return std::nullopt;
  }
  return v;
}

namespace {

std::string launch_value_text(const LaunchValue &v) {
  std::vector<std::string> parts;
  if (v.factor != 1 || v.params.empty()) parts.push_back(std::to_string(v.factor));
  for (int p : v.params) parts.push_back(fmt::format("p{}", p));
  return fmt::format("{}", fmt::join(parts, "*"));
}

std::optional<LaunchValue> parse_launch_value(const std::string &text) {
  LaunchValue v;
  std::stringstream ss(text);
  std::string part;
  bool first = true;
  while (std::getline(ss, part, '*')) {
    if (part.empty()) return std::nullopt;
    try {
      if (part[0] == 'p') {
        size_t used = 0;
        int p = std::stoi(part.substr(1), &used);
        if (used + 1 != part.size() || p < 0) return std::nullopt;
        v.params.push_back(p);
      } else if (first) {
        size_t used = 0;
        v.factor = std::stoll(part, &used);
        if (used != part.size()) return std::nullopt;
      } else {
        return std::nullopt;
      }
    } catch (const std::exception &) {
      return std::nullopt;
    }
    first = false;
  }
  if (first) return std::nullopt;
  std::sort(v.params.begin(), v.params.end());
  return v;
}

// ---- affine forms of index and pointer tiles ----

/// One term of an affine form: `scalar` (null: the constant 1) times `factor`, varying along tile axis `axis`
/// (an arange along it; scalar null) or uniform (axis −1).
struct Term {
  const ir::Value *scalar = nullptr;
  int axis = -1;
  LaunchValue factor;
  bool operator==(const Term &) const = default;
};

struct Form {
  const ir::Value *root = nullptr;  // pointer forms: the pointer parameter
  std::vector<Term> terms;
};

bool is_param(const ir::Function &fn, const ir::Value *v) { return !v->def && v->block == fn.body.get(); }

int param_index(const ir::Function &fn, const ir::Value *v) {
  for (size_t i = 0; i < fn.params.size(); ++i)
    if (fn.param(int(i)) == v) return int(i);
  return -1;
}

std::optional<LaunchValue> times(const LaunchValue &a, const LaunchValue &b) {
  LaunchValue r;
  if (__builtin_mul_overflow(a.factor, b.factor, &r.factor)) return std::nullopt;
  r.params = a.params;
  r.params.insert(r.params.end(), b.params.begin(), b.params.end());
  std::sort(r.params.begin(), r.params.end());
  return r;
}

/// The form's value as a launch value: one uniform term, a constant or an integer parameter times a factor.
std::optional<LaunchValue> as_launch_value(const ir::Function &fn, const Form &f) {
  if (f.root || f.terms.size() != 1 || f.terms[0].axis >= 0) return std::nullopt;
  const Term &t = f.terms[0];
  if (!t.scalar) return t.factor;
  const ir::Value *p = t.scalar;
  // An integer parameter converted to i32 (the flex kernels' i64 strides where offsets fit i32): its value.
  if (p->def && p->def->kind == ir::OpKind::Cast && !p->def->operand(0)->type.elem.is_ptr &&
      (p->def->operand(0)->type.dtype() == DType::i64 || p->def->operand(0)->type.dtype() == DType::i32))
    p = p->def->operand(0);
  if (!is_param(fn, p)) return std::nullopt;
  return times(t.factor, LaunchValue{1, {param_index(fn, p)}});
}

struct Analyzer {
  const ir::Function &fn;

  std::optional<Form> form(const ir::Value *v, int depth = 0) {
    using K = ir::OpKind;
    if (depth > 64) return std::nullopt;
    const ir::Type &t = v->type;
    if (t.elem.is_ptr) {
      if (is_param(fn, v)) return Form{v, {}};
      if (!v->def) return std::nullopt;
      const ir::Op &d = *v->def;
      if (d.kind == K::Splat) return form(d.operand(0), depth + 1);
      if (d.kind == K::Broadcast) return broadcast(d, depth);
      if (d.kind == K::ExpandDims) return expanded(d, depth);
      if (d.kind == K::PtrAdd) {
        auto p = form(d.operand(0), depth + 1), o = form(d.operand(1), depth + 1);
        if (!p || !o || !p->root || o->root) return std::nullopt;
        p->terms.insert(p->terms.end(), o->terms.begin(), o->terms.end());
        return p;
      }
      return std::nullopt;
    }
    if (t.dtype() != DType::i32) return std::nullopt;
    const bool scalar = t.is_scalar();
    auto opaque = [&]() -> std::optional<Form> {
      if (!scalar) return std::nullopt;
      return Form{nullptr, {Term{v, -1, {}}}};
    };
    if (!v->def) return opaque();  // a parameter or a loop's induction variable
    const ir::Op &d = *v->def;
    switch (d.kind) {
      case K::Constant: return Form{nullptr, {Term{nullptr, -1, LaunchValue{d.attrs.ivalue, {}}}}};
      case K::Arange: {
        Form f{nullptr, {Term{nullptr, 0, {}}}};
        if (d.attrs.ints.at(0) != 0) f.terms.push_back(Term{nullptr, -1, LaunchValue{d.attrs.ints.at(0), {}}});
        return f;
      }
      case K::Splat: return form(d.operand(0), depth + 1);
      case K::Broadcast: return broadcast(d, depth);
      case K::ExpandDims: return expanded(d, depth);
      case K::Add: case K::Sub: {
        auto a = form(d.operand(0), depth + 1), b = form(d.operand(1), depth + 1);
        if (!a || !b) return opaque();
        if (d.kind == K::Sub)
          for (Term &x : b->terms) x.factor.factor = -x.factor.factor;
        a->terms.insert(a->terms.end(), b->terms.begin(), b->terms.end());
        return a;
      }
      case K::Mul: {
        auto a = form(d.operand(0), depth + 1), b = form(d.operand(1), depth + 1);
        if (!a || !b) return opaque();
        std::optional<LaunchValue> k = as_launch_value(fn, *b);
        const Form *other = &*a;
        if (!k) {
          k = as_launch_value(fn, *a);
          other = &*b;
        }
        if (!k) return opaque();
        Form r;
        for (Term x : other->terms) {
          auto f = times(x.factor, *k);
          if (!f) return std::nullopt;
          x.factor = *f;
          r.terms.push_back(x);
        }
        return r;
      }
      default: return opaque();
    }
  }

  /// A broadcast stretches axes of size 1, along which the index is 0: their aranges (of one element) drop out.
  std::optional<Form> broadcast(const ir::Op &d, int depth) {
    auto f = form(d.operand(0), depth + 1);
    if (!f) return std::nullopt;
    const ir::Type &from = d.operand(0)->type;
    std::erase_if(f->terms, [&](const Term &x) {
      return x.axis >= 0 && size_t(x.axis) < from.shape.size() && from.shape[size_t(x.axis)] == 1;
    });
    return f;
  }

  std::optional<Form> expanded(const ir::Op &d, int depth) {
    auto f = form(d.operand(0), depth + 1);
    if (!f) return std::nullopt;
    for (Term &x : f->terms)
      if (x.axis >= d.attrs.axis) ++x.axis;
    return f;
  }
};

/// Whether scalar v is ≥ 0, assuming i32 arithmetic does not wrap and each integer parameter it adds to `assumed`
/// is ≥ 0 at the launch (the runtime checks them): constants, program ids, such parameters, the induction variable
/// of `loop` (lower bound ≥ 0, positive constant step), sums, products, minima, quotients, remainders and shifts
/// of such, a maximum with one such, a select of two such, casts between integer types.
bool non_negative(const ir::Function &fn, const ir::Value *v, const ir::Op &loop, std::vector<int> &assumed,
                  int depth = 0) {
  using K = ir::OpKind;
  if (depth > 32) return false;
  auto nn = [&](const ir::Value *x) { return non_negative(fn, x, loop, assumed, depth + 1); };
  if (!v->def) {
    if (is_param(fn, v)) {
      if (v->type.elem.is_ptr || (v->type.dtype() != DType::i32 && v->type.dtype() != DType::i64)) return false;
      const int p = param_index(fn, v);
      if (std::find(assumed.begin(), assumed.end(), p) == assumed.end()) assumed.push_back(p);
      return true;
    }
    if (v != loop.region(0)->arg(0)) return false;
    const ir::Op *step = loop.operand(2)->def;
    return step && step->kind == K::Constant && step->attrs.ivalue > 0 && nn(loop.operand(0));
  }
  const ir::Op &d = *v->def;
  switch (d.kind) {
    case K::Constant: return d.attrs.ivalue >= 0;
    case K::ProgramId: return true;
    case K::Add: case K::Mul: case K::Minimum: case K::Div: return nn(d.operand(0)) && nn(d.operand(1));
    case K::Maximum: {
      // Either operand suffices: the one that adds fewer assumptions.
      std::vector<int> with0 = assumed, with1 = assumed;
      const bool ok0 = non_negative(fn, d.operand(0), loop, with0, depth + 1);
      const bool ok1 = non_negative(fn, d.operand(1), loop, with1, depth + 1);
      if (!ok0 && !ok1) return false;
      assumed = !ok1 || (ok0 && with0.size() <= with1.size()) ? with0 : with1;
      return true;
    }
    case K::Shr: case K::Rem: return nn(d.operand(0));  // the sign of a non-negative numerator
    case K::Select: return nn(d.operand(1)) && nn(d.operand(2));
    case K::Cast: return d.operand(0)->type.is_scalar() && !d.operand(0)->type.elem.is_ptr &&
                         (d.operand(0)->type.dtype() == DType::i32 || d.operand(0)->type.dtype() == DType::i64) &&
                         nn(d.operand(0));
    default: return false;
  }
}

/// The least value of a non-negative scalar x inside `loop`: the loop's first value for its induction variable when
/// that is a constant and the loop counts up; 0 otherwise.
int64_t least_value(const ir::Op &loop, const ir::Value *x) {
  if (x != loop.region(0)->arg(0)) return 0;
  const ir::Op *lb = loop.operand(0)->def, *step = loop.operand(2)->def;
  if (!lb || lb->kind != ir::OpKind::Constant || !step || step->kind != ir::OpKind::Constant || step->attrs.ivalue <= 0)
    return 0;
  return std::max<int64_t>(lb->attrs.ivalue, 0);
}

/// The bounds a mask puts on each tile axis: `index < bound` for a 2-D tile, as (index form, bound) per axis.
/// `axes` maps the axes of m to the tile's (m may be a lower-rank mask expanded and broadcast to the tile).
bool mask_bounds(const ir::Function &fn, Analyzer &A, const ir::Value *m, std::optional<std::pair<Form, LaunchValue>> (&out)[2],
                 std::vector<int> axes = {0, 1}, int depth = 0) {
  using K = ir::OpKind;
  if (!m->def || depth > 16) return false;
  const ir::Op &d = *m->def;
  if (d.kind == K::Broadcast) return mask_bounds(fn, A, d.operand(0), out, axes, depth + 1);
  if (d.kind == K::ExpandDims) {
    axes.erase(axes.begin() + d.attrs.axis);
    return mask_bounds(fn, A, d.operand(0), out, axes, depth + 1);
  }
  if (d.kind == K::And)
    return mask_bounds(fn, A, d.operand(0), out, axes, depth + 1) && mask_bounds(fn, A, d.operand(1), out, axes, depth + 1);
  if (d.kind != K::Cmp || d.attrs.pred != ir::CmpPred::lt) return false;
  auto index = A.form(d.operand(0)), bound = A.form(d.operand(1));
  if (!index || !bound) return false;
  std::optional<LaunchValue> b = as_launch_value(fn, *bound);
  if (!b || (b->params.empty() && b->factor <= 0)) return false;  // a constant extent ≤ 0: no map has it
  int axis = -1;
  for (Term &t : index->terms) {
    if (t.axis < 0) continue;
    if (size_t(t.axis) >= axes.size()) return false;
    t.axis = axes[size_t(t.axis)];
    if (axis >= 0 && t.axis != axis) return false;
    axis = t.axis;
  }
  if (axis < 0 || axis > 1 || out[axis]) return false;
  out[axis] = std::make_pair(*index, *b);
  return true;
}

/// Whether two forms are the same sum (as multisets of terms).
bool same_sum(std::vector<Term> a, std::vector<Term> b) {
  if (a.size() != b.size()) return false;
  for (const Term &t : a) {
    auto it = std::find(b.begin(), b.end(), t);
    if (it == b.end()) return false;
    b.erase(it);
  }
  return true;
}

}  // namespace

std::string tensor_map_text(const TensorMapSpec &s) {
  std::vector<std::string> dims;
  for (const TensorMapDim &d : s.dims)
    dims.push_back(fmt::format("{}:{}", d.extent ? launch_value_text(*d.extent) : "*", launch_value_text(d.stride)));
  std::vector<std::string> assumed;
  for (int p : s.assumed) assumed.push_back(fmt::format("p{}", p));
  return fmt::format("base=p{} {} box={}x{} swizzle={} dims={}{}", s.base_param, dtype_name(s.dtype), s.box_rows,
                     s.box_cols, s.swizzle_bytes, fmt::join(dims, ","),
                     assumed.empty() ? "" : fmt::format(" assumes={}", fmt::join(assumed, ",")));
}

std::optional<TensorMapSpec> parse_tensor_map(const std::string &text) {
  TensorMapSpec s;
  std::stringstream ss(text);
  std::string word;
  int seen = 0;
  auto whole = [](const std::string &v) {  // a decimal integer and nothing else
    size_t used = 0;
    if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-')) throw std::invalid_argument(v);
    const long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return int64_t(x);
  };
  while (ss >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) {
      if (word == "bf16") s.dtype = DType::bf16;
      else if (word == "f16") s.dtype = DType::f16;
      else return std::nullopt;
      seen |= 1;
      continue;
    }
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    try {
      if (key == "base" && value.size() > 1 && value[0] == 'p') {
        s.base_param = int(whole(value.substr(1)));
        seen |= 2;
      } else if (key == "box") {
        const size_t x = value.find('x');
        if (x == std::string::npos) return std::nullopt;
        s.box_rows = whole(value.substr(0, x));
        s.box_cols = whole(value.substr(x + 1));
        seen |= 4;
      } else if (key == "swizzle") {
        s.swizzle_bytes = int(whole(value));
        if (s.swizzle_bytes != 0 && s.swizzle_bytes != 32 && s.swizzle_bytes != 64 && s.swizzle_bytes != 128)
          return std::nullopt;
        seen |= 8;
      } else if (key == "assumes") {
        std::stringstream ps(value);
        std::string p;
        while (std::getline(ps, p, ',')) {
          if (p.size() < 2 || p[0] != 'p') return std::nullopt;
          s.assumed.push_back(int(whole(p.substr(1))));
        }
        if (s.assumed.empty()) return std::nullopt;
      } else if (key == "dims") {
        std::stringstream ds(value);
        std::string dim;
        while (std::getline(ds, dim, ',')) {
          const size_t colon = dim.find(':');
          if (colon == std::string::npos) return std::nullopt;
          TensorMapDim d;
          const std::string extent = dim.substr(0, colon);
          if (extent != "*") {
            d.extent = parse_launch_value(extent);
            if (!d.extent) return std::nullopt;
          }
          auto stride = parse_launch_value(dim.substr(colon + 1));
          if (!stride) return std::nullopt;
          d.stride = *stride;
          s.dims.push_back(d);
        }
        seen |= 16;
      } else {
        return std::nullopt;
      }
    } catch (const std::exception &) {
      return std::nullopt;
    }
  }
  if (seen != 31 || s.base_param < 0 || s.box_rows <= 0 || s.box_cols <= 0 || s.dims.size() < 2 || s.dims.size() > 5)
    return std::nullopt;
  return s;
}

std::optional<TmaTile> tma_tile(const ir::Function &fn, const ir::Op &load, const ir::Op &loop, std::string *why) {
  auto refuse = [&](std::string reason) -> std::optional<TmaTile> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const ir::Type &t = load.result()->type;
  if (t.rank() != 2 || (t.dtype() != DType::bf16 && t.dtype() != DType::f16))
    return refuse("not a 2-D f16/bf16 tile");
  Analyzer A{fn};
  std::optional<Form> ptr = A.form(load.operand(0));
  if (!ptr || !ptr->root) return refuse("its pointers are not a parameter plus an affine offset");
  const int base = param_index(fn, ptr->root);
  if (base < 0 || !fn.params[size_t(base)].align16) return refuse("its base pointer is not known 16-byte aligned");
  // Split the pointer's terms by axis: one arange per axis, the last with factor 1 (contiguous rows).
  std::optional<LaunchValue> stride;
  std::vector<Term> uniform;
  bool col_arange = false;
  for (const Term &x : ptr->terms) {
    if (x.axis == 1) {
      if (col_arange || x.factor != LaunchValue{}) return refuse("its columns are not contiguous");
      col_arange = true;
    } else if (x.axis == 0) {
      if (stride) return refuse("its rows are not one arange times a stride");
      stride = x.factor;
    } else {
      uniform.push_back(x);
    }
  }
  if (!col_arange || !stride) return refuse("its pointers do not vary along both axes");
  // A stride's bytes are a multiple of 16: its constant part alone, or with a parameter specialized as divisible
  // by 16 (each such parameter contributes a factor of 16).
  auto row_aligned = [&](const LaunchValue &v) {
    if (v.factor <= 0) return false;
    if ((v.factor * 2) % 16 == 0) return true;
    return !v.params.empty() &&
           std::all_of(v.params.begin(), v.params.end(), [&](int p) { return fn.params[size_t(p)].div16; });
  };
  if (!row_aligned(*stride)) return refuse("its row stride is not a positive multiple of 16 bytes known at launch");
  // Uniform terms whose factor is a multiple of the row stride go to the row start; constant factors to the column
  // start; the rest, grouped by factor, each to a dimension of its own (a batch or head offset).
  TmaTile tile;
  tile.start.resize(2);
  std::vector<LaunchValue> strides{LaunchValue{}, *stride};
  auto add = [&](ScalarSum &s, const Term &x, int64_t mult) {
    if (x.scalar) s.terms.push_back({x.scalar, mult});
    else s.constant += mult;
  };
  for (const Term &x : uniform) {
    if (x.factor.params == stride->params && x.factor.factor % stride->factor == 0 &&
        (!stride->params.empty() || x.factor.params.empty())) {
      add(tile.start[1], x, x.factor.factor / stride->factor);
    } else if (x.factor.params.empty()) {
      add(tile.start[0], x, x.factor.factor);
    } else {
      auto same = std::find(strides.begin() + 2, strides.end(), x.factor);
      if (same == strides.end()) {
        if (strides.size() == 5) return refuse("its pointers have more than three offsets besides rows and columns");
        if (!row_aligned(x.factor)) return refuse("an offset's stride is not a multiple of 16 bytes known at launch");
        strides.push_back(x.factor);
        tile.start.emplace_back();
        same = strides.end() - 1;
      }
      add(tile.start[size_t(same - strides.begin())], x, 1);
    }
  }
  // The mask: row < R, col < C, both or none, over the same row and column indices as the pointers'.
  std::optional<std::pair<Form, LaunchValue>> bounds[2];
  if (load.num_operands() > 1 && !mask_bounds(fn, A, load.operand(1), bounds))
    return refuse("its mask is not `row < R`, `col < C` or both, with R and C known at launch");
  auto normal = [](const std::vector<Term> &v) {  // repeated scalars and the constants merged
    std::vector<Term> out;
    int64_t constant = 0;
    for (const Term &x : v) {
      if (!x.scalar && x.axis < 0) {
        constant += x.factor.factor;
        continue;
      }
      auto it = std::find_if(out.begin(), out.end(), [&](const Term &y) { return y.scalar == x.scalar && y.axis == x.axis; });
      if (it != out.end()) it->factor.factor += x.factor.factor;
      else out.push_back(x);
    }
    if (constant) out.push_back(Term{nullptr, -1, LaunchValue{constant, {}}});
    return out;
  };
  for (int axis = 0; axis < 2; ++axis) {
    if (!bounds[axis]) continue;
    for (const Term &x : bounds[axis]->first.terms)
      if (!x.factor.params.empty()) return refuse("its mask's index is not its pointers' index");
    const ScalarSum &s = tile.start[axis == 0 ? 1 : 0];
    std::vector<Term> index{Term{nullptr, axis, {}}};
    for (auto [x, m] : s.terms) index.push_back(Term{x, -1, LaunchValue{m, {}}});
    if (s.constant) index.push_back(Term{nullptr, -1, LaunchValue{s.constant, {}}});
    if (!same_sum(normal(bounds[axis]->first.terms), normal(index)))
      return refuse("its mask's index is not its pointers' index");
  }
  // Each start is a constant plus non-negative terms; the loop's induction variable counts from its first value,
  // so a start such as `iv − BLOCK` (the previous block's, from the loop's second iteration on) qualifies too.
  for (const ScalarSum &s : tile.start) {
    int64_t least = s.constant;
    for (auto [x, m] : s.terms) {
      if (m < 0 || !x->type.is_scalar() || x->type.dtype() != DType::i32 || !non_negative(fn, x, loop, tile.map.assumed))
        return refuse("a start of its tile may be negative (TMA reads zeros there, the load memory)");
      int64_t term = 0;  // both non-negative: an overflow means a start far above 0
      if (__builtin_mul_overflow(m, least_value(loop, x), &term) || __builtin_add_overflow(least, term, &least))
        least = std::numeric_limits<int64_t>::max();
    }
    if (least < 0) return refuse("a start of its tile may be negative");
  }
  // TMA reads through the async proxy, which this kernel's own stores (generic proxy) do not reach without a
  // proxy fence: no store or atomic of the kernel may write through the tensor's parameter (or an unknown one).
  const std::unordered_set<const ir::Value *> written = written_pointer_roots(fn, *fn.body);
  if (written.count(nullptr) || written.count(ptr->root)) return refuse("the kernel writes through its tensor's pointer (or one not traced to a parameter), which "
                             "TMA's reads would not be ordered after");
  tile.map.base_param = base;
  tile.map.dtype = t.dtype();
  tile.map.dims.push_back(TensorMapDim{bounds[1] ? std::optional(bounds[1]->second) : std::nullopt, LaunchValue{}});
  tile.map.dims.push_back(TensorMapDim{bounds[0] ? std::optional(bounds[0]->second) : std::nullopt, *stride});
  for (size_t k = 2; k < strides.size(); ++k) tile.map.dims.push_back(TensorMapDim{std::nullopt, strides[k]});
  return tile;
}

}  // namespace tilejit::codegen
