// Which loads a tensor map can copy (codegen/tma.h).
#include "codegen/tma.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

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
  if (!is_param(fn, t.scalar)) return std::nullopt;
  return times(t.factor, LaunchValue{1, {param_index(fn, t.scalar)}});
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
      if (d.kind == K::Splat || d.kind == K::Broadcast) return form(d.operand(0), depth + 1);
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
      case K::Broadcast: return form(d.operand(0), depth + 1);
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

  std::optional<Form> expanded(const ir::Op &d, int depth) {
    auto f = form(d.operand(0), depth + 1);
    if (!f) return std::nullopt;
    for (Term &x : f->terms)
      if (x.axis >= d.attrs.axis) ++x.axis;
    return f;
  }
};

/// Whether scalar v is ≥ 0, assuming i32 arithmetic does not wrap: constants, program ids, the induction variable
/// of `loop` (lower bound ≥ 0, positive constant step), and sums and products of such.
bool non_negative(const ir::Value *v, const ir::Op &loop, int depth = 0) {
  using K = ir::OpKind;
  if (depth > 32) return false;
  if (!v->def) {
    if (v != loop.region(0)->arg(0)) return false;
    const ir::Op *step = loop.operand(2)->def;
    return step && step->kind == K::Constant && step->attrs.ivalue > 0 && non_negative(loop.operand(0), loop, depth + 1);
  }
  const ir::Op &d = *v->def;
  switch (d.kind) {
    case K::Constant: return d.attrs.ivalue >= 0;
    case K::ProgramId: return true;
    case K::Add: case K::Mul: case K::Maximum:
      return non_negative(d.operand(0), loop, depth + 1) && non_negative(d.operand(1), loop, depth + 1);
    default: return false;
  }
}

/// The bounds a mask puts on each tile axis: `index < bound` for a 2-D tile, as (index form, bound) per axis.
bool mask_bounds(const ir::Function &fn, Analyzer &A, const ir::Value *m, std::optional<std::pair<Form, LaunchValue>> (&out)[2],
                 int depth = 0) {
  using K = ir::OpKind;
  if (!m->def || depth > 16) return false;
  const ir::Op &d = *m->def;
  if (d.kind == K::Broadcast) return mask_bounds(fn, A, d.operand(0), out, depth + 1);
  if (d.kind == K::And)
    return mask_bounds(fn, A, d.operand(0), out, depth + 1) && mask_bounds(fn, A, d.operand(1), out, depth + 1);
  if (d.kind != K::Cmp || d.attrs.pred != ir::CmpPred::lt) return false;
  auto index = A.form(d.operand(0)), bound = A.form(d.operand(1));
  if (!index || !bound) return false;
  std::optional<LaunchValue> b = as_launch_value(fn, *bound);
  if (!b) return false;
  int axis = -1;
  for (const Term &t : index->terms) {
    if (t.axis < 0) continue;
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
  return fmt::format("base=p{} rows={} cols={} stride={} box={}x{} swizzle={} {}", s.base_param,
                     launch_value_text(s.rows), launch_value_text(s.cols), launch_value_text(s.row_stride), s.box_rows,
                     s.box_cols, s.swizzle_bytes, dtype_name(s.dtype));
}

std::optional<TensorMapSpec> parse_tensor_map(const std::string &text) {
  TensorMapSpec s;
  std::stringstream ss(text);
  std::string word;
  int seen = 0;
  while (ss >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) {
      if (word == "bf16") s.dtype = DType::bf16;
      else if (word == "f16") s.dtype = DType::f16;
      else return std::nullopt;
      seen |= 64;
      continue;
    }
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    try {
      if (key == "base" && value.size() > 1 && value[0] == 'p') {
        s.base_param = std::stoi(value.substr(1));
        seen |= 1;
      } else if (key == "rows" || key == "cols" || key == "stride") {
        auto v = parse_launch_value(value);
        if (!v) return std::nullopt;
        (key == "rows" ? s.rows : key == "cols" ? s.cols : s.row_stride) = *v;
        seen |= key == "rows" ? 2 : key == "cols" ? 4 : 8;
      } else if (key == "box") {
        const size_t x = value.find('x');
        if (x == std::string::npos) return std::nullopt;
        s.box_rows = std::stoll(value.substr(0, x));
        s.box_cols = std::stoll(value.substr(x + 1));
        seen |= 16;
      } else if (key == "swizzle") {
        s.swizzle_bytes = std::stoi(value);
        seen |= 32;
      } else {
        return std::nullopt;
      }
    } catch (const std::exception &) {
      return std::nullopt;
    }
  }
  if (seen != 127 || s.base_param < 0 || s.box_rows <= 0 || s.box_cols <= 0) return std::nullopt;
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
  if (load.num_operands() < 2) return refuse("no mask bounds the tensor (TMA needs its extent)");
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
  const int64_t elem = 2;
  int64_t aligned = stride->factor * elem;
  for (int p : stride->params) {
    if (!fn.params[size_t(p)].div16) {
      aligned = 0;
      break;
    }
  }
  if (stride->factor <= 0 || (aligned % 16 && stride->params.empty()) || (aligned == 0))
    return refuse("its row stride is not a positive multiple of 16 bytes known at launch");
  // Uniform terms go to the row start when their factor is a multiple of the stride, else to the column start.
  TmaTile tile;
  auto add = [&](ScalarSum &s, const Term &x, int64_t mult) {
    if (x.scalar) s.terms.push_back({x.scalar, mult});
    else s.constant += mult;
  };
  for (const Term &x : uniform) {
    if (!x.factor.params.empty() && x.factor.params == stride->params && x.factor.factor % stride->factor == 0) {
      add(tile.row0, x, x.factor.factor / stride->factor);
    } else if (stride->params.empty() && x.factor.params.empty() && x.factor.factor % stride->factor == 0) {
      add(tile.row0, x, x.factor.factor / stride->factor);
    } else if (x.factor.params.empty()) {
      add(tile.col0, x, x.factor.factor);
    } else {
      return refuse("an offset of its pointers is neither whole rows nor columns");
    }
  }
  // The mask: exactly row < R and col < C, over the same row and column indices.
  std::optional<std::pair<Form, LaunchValue>> bounds[2];
  if (!mask_bounds(fn, A, load.operand(1), bounds) || !bounds[0] || !bounds[1])
    return refuse("its mask is not `row < R & col < C` with R and C known at launch");
  auto index_terms = [](const ScalarSum &s, int axis) {
    std::vector<Term> v{Term{nullptr, axis, {}}};
    for (auto [x, m] : s.terms) v.push_back(Term{x, -1, LaunchValue{m, {}}});
    if (s.constant) v.push_back(Term{nullptr, -1, LaunchValue{s.constant, {}}});
    return v;
  };
  // A mask index's uniform terms: multiples of 1 (a factor from a launch value is not a known multiple).
  for (int axis = 0; axis < 2; ++axis) {
    std::vector<Term> mask_terms;
    for (Term x : bounds[axis]->first.terms) {
      if (!x.factor.params.empty()) return refuse("its mask's index is not its pointers' index");
      if (!x.scalar && x.axis < 0) {
        x = Term{nullptr, -1, LaunchValue{x.factor.factor, {}}};
      }
      mask_terms.push_back(x);
    }
    // Merge repeated scalars and constants so that both sides are written the same way.
    auto normal = [](std::vector<Term> v) {
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
    if (!same_sum(normal(mask_terms), normal(index_terms(axis == 0 ? tile.row0 : tile.col0, axis))))
      return refuse("its mask's index is not its pointers' index");
  }
  for (const ScalarSum *s : {&tile.row0, &tile.col0}) {
    if (s->constant < 0) return refuse("a start of its tile may be negative");
    for (auto [x, m] : s->terms)
      if (m < 0 || !x->type.is_scalar() || x->type.dtype() != DType::i32 || !non_negative(x, loop))
        return refuse("a start of its tile may be negative (TMA reads zeros there, the load memory)");
  }
  tile.map.base_param = base;
  tile.map.dtype = t.dtype();
  tile.map.rows = bounds[0]->second;
  tile.map.cols = bounds[1]->second;
  tile.map.row_stride = *stride;
  return tile;
}

}  // namespace tilejit::codegen
