#include "codegen/axis_info.h"

#include <algorithm>

namespace tilejit::codegen {
namespace {

constexpr int64_t kMax = int64_t(1) << 30;

int64_t last_dim(const ir::Value *v) { return v->type.is_scalar() ? 1 : v->type.shape.back(); }

/// Divisibility of every element (not only of group starts).
int64_t elem_div(const AxisInfo &a) { return a.contig > 1 ? 1 : a.div; }

/// What we know about a value nothing is known about.
AxisInfo unknown(const ir::Value *v) {
  AxisInfo a;
  if (v->type.is_ptr()) a.div = dtype_bytes(v->type.dtype());
  return a;
}

class Analyzer {
 public:
  explicit Analyzer(AxisInfoMap &m) : m_(m) {}

  void block(const ir::Block &b) {
    for (auto &op : b.ops) this->op(*op);
  }

 private:
  AxisInfoMap &m_;

  AxisInfo get(const ir::Value *v) {
    auto it = m_.find(v);
    return it == m_.end() ? unknown(v) : it->second;
  }

  // x + y where y may be the contiguous one; used by Add and PtrAdd (scale = bytes per element of y's unit).
  static AxisInfo add(const AxisInfo &a, const AxisInfo &b, int64_t b_scale) {
    AxisInfo r;
    r.contig = std::max(std::min(a.contig, b.constancy), std::min(b.contig, a.constancy));
    r.constancy = std::min(a.constancy, b.constancy);
    if (a.contig > 1 && b.contig > 1) r.div = 1;
    else r.div = std::min(a.div, std::min(kMax, b.div * b_scale));
    if (r.contig > 1 && r.constancy > 1) r.constancy = 1;  // cannot be both; keep contiguity
    return r;
  }

  void op(const ir::Op &op) {
    using K = ir::OpKind;
    auto in = [&](int i) { return get(op.operand(i)); };
    const ir::Value *res = op.num_results() ? op.result() : nullptr;
    AxisInfo r;
    switch (op.kind) {
      case K::Constant: {
        r.constancy = res ? last_dim(res) : 1;
        r.div = is_int(res->type.dtype()) ? pow2_divisor(op.attrs.ivalue) : 1;
        break;
      }
      case K::Arange:
        r.contig = op.attrs.ints.at(1) - op.attrs.ints.at(0);
        r.div = pow2_divisor(op.attrs.ints.at(0));
        break;
      case K::Splat:
        r = in(0);
        r.contig = 1;
        r.constancy = last_dim(res);
        break;
      case K::Broadcast: {
        r = in(0);
        const auto &src = op.operand(0)->type.shape;
        if (!src.empty() && src.back() == 1 && last_dim(res) > 1) {
          r.contig = 1;
          r.div = elem_div(in(0));
          r.constancy = last_dim(res);
        }
        break;
      }
      case K::ExpandDims:
        r = in(0);
        if (op.attrs.axis == res->type.rank() - 1) r = AxisInfo{1, 1, elem_div(in(0))};
        break;
      case K::Add:
        r = add(in(0), in(1), 1);
        break;
      case K::Sub: {
        AxisInfo a = in(0), b = in(1);
        r.contig = std::min(a.contig, b.constancy);
        r.constancy = std::min(a.constancy, b.constancy);
        r.div = std::min(r.contig > 1 ? a.div : elem_div(a), elem_div(b));
        if (r.contig > 1) r.constancy = 1;
        break;
      }
      case K::Mul: {
        AxisInfo a = in(0), b = in(1);
        r.constancy = std::min(a.constancy, b.constancy);
        r.div = std::min(kMax, elem_div(a) * elem_div(b));
        break;
      }
      case K::Shl: {
        AxisInfo a = in(0);
        r.constancy = std::min(a.constancy, in(1).constancy);
        auto *c = op.operand(1)->def;
        if (c && c->kind == K::Constant && c->attrs.ivalue >= 0 && c->attrs.ivalue < 30)
          r.div = std::min(kMax, elem_div(a) << c->attrs.ivalue);
        break;
      }
      case K::PtrAdd: {
        int64_t esize = dtype_bytes(res->type.dtype());
        r = add(in(0), in(1), esize);
        break;
      }
      case K::Cast:
        if (is_int(res->type.dtype()) && res->type.dtype() != DType::i1 &&
            is_int(op.operand(0)->type.dtype()))
          r = in(0);
        else
          r.constancy = in(0).constancy;
        break;
      case K::Cmp: {
        AxisInfo a = in(0), b = in(1);
        r.constancy = std::min(a.constancy, b.constancy);
        auto pred = op.attrs.pred;
        // y..y+g-1 (y divisible by g) against a bound n divisible by g: y < n ⇔ y+g-1 < n, same for ≥.
        auto group = [](const AxisInfo &c, const AxisInfo &u) {
          return std::min({c.contig, c.div, u.div, u.constancy});
        };
        if (a.contig > 1 && (pred == ir::CmpPred::lt || pred == ir::CmpPred::ge))
          r.constancy = std::max(r.constancy, group(a, b));
        if (b.contig > 1 && (pred == ir::CmpPred::gt || pred == ir::CmpPred::le))
          r.constancy = std::max(r.constancy, group(b, a));
        break;
      }
      case K::For: {
        // region args: iv (divisible by gcd(lb, step)), then carried values meeting init and yield.
        const ir::Block &body = *op.region(0);
        int n = op.num_operands() - 3;
        AxisInfo iv;
        iv.div = std::min(in(0).div, in(2).div);
        m_[body.arg(0)] = iv;
        std::vector<AxisInfo> cur(n);
        for (int i = 0; i < n; ++i) cur[i] = in(3 + i);
        for (int iter = 0;; ++iter) {
          for (int i = 0; i < n; ++i) m_[body.arg(1 + i)] = cur[i];
          block(body);
          const ir::Op &y = *body.ops.back();
          bool changed = false;
          for (int i = 0; i < n && i < y.num_operands(); ++i) {
            AxisInfo yi = get(y.operand(i)), m;
            m.contig = std::min(cur[i].contig, yi.contig);
            m.constancy = std::min(cur[i].constancy, yi.constancy);
            m.div = std::min(cur[i].div, yi.div);
            if (!(m == cur[i])) changed = true;
            cur[i] = m;
          }
          if (!changed) break;
          if (iter >= 3) {  // give up precision rather than iterate long
            for (int i = 0; i < n; ++i) cur[i] = unknown(body.arg(1 + i));
            for (int i = 0; i < n; ++i) m_[body.arg(1 + i)] = cur[i];
            block(body);
            break;
          }
        }
        for (int i = 0; i < op.num_results(); ++i) m_[op.result(i)] = cur[i];
        return;
      }
      case K::If: {
        for (auto &reg : op.regions) block(*reg);
        for (int i = 0; i < op.num_results(); ++i) {
          AxisInfo m;
          bool first = true;
          for (auto &reg : op.regions) {
            if (reg->ops.empty() || reg->ops.back()->kind != K::Yield) continue;
            AxisInfo yi = get(reg->ops.back()->operand(i));
            if (first) m = yi;
            else m = AxisInfo{std::min(m.contig, yi.contig), std::min(m.constancy, yi.constancy),
                              std::min(m.div, yi.div)};
            first = false;
          }
          m_[op.result(i)] = m;
        }
        return;
      }
      default:
        // Any other elementwise op keeps constancy; nothing else is known.
        if (res && !res->type.is_scalar()) {
          r.constancy = last_dim(res);
          bool elementwise = true;
          for (auto *o : op.operands) {
            if (o->type.shape != res->type.shape) elementwise = false;
            else r.constancy = std::min(r.constancy, get(o).constancy);
          }
          if (!elementwise || op.kind == K::Load || op.kind == K::AtomicAdd || op.kind == K::Dot)
            r.constancy = 1;
        }
        if (res && res->type.is_ptr()) r.div = dtype_bytes(res->type.dtype());
        break;
    }
    for (int i = 0; i < op.num_results(); ++i) m_[op.result(i)] = r;
  }
};

}  // namespace

int64_t pow2_divisor(int64_t v) {
  if (v == 0) return kMax;
  int64_t d = 1;
  while ((v & d) == 0 && d < kMax) d <<= 1;
  return d;
}

AxisInfoMap analyze_axis_info(const ir::Function &fn) {
  AxisInfoMap m;
  for (size_t i = 0; i < fn.params.size(); ++i) {
    const auto &p = fn.params[i];
    AxisInfo a;
    if (p.type.is_ptr()) a.div = p.align16 ? 16 : dtype_bytes(p.type.dtype());
    else if (is_int(p.type.dtype())) a.div = p.div16 ? 16 : 1;
    m[fn.param(int(i))] = a;
  }
  Analyzer(m).block(*fn.body);
  return m;
}

}  // namespace tilejit::codegen
