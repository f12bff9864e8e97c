// The IR verifier: re-checks the invariants the DSL's semantic checks establish and every pass must keep.
// It runs before and after the optimization pipeline, so a failure names a pass bug or a DSL bug, never
// a user error; the message says what is wrong, prints the op and gives its source line.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "ir/numerics.h"
#include "ir/passes.h"
#include "ir/printer_detail.h"
#include "tilejit/error.h"

namespace tilejit::ir {
namespace {

class Verifier {
 public:
  explicit Verifier(const Function &fn) : fn_(fn), names_(fn) {}

  void run() {
    const Block &body = *fn_.body;
    if (body.parent != nullptr) throw VerifyError(fmt::format("verify: function @{}: its body block has a parent op", fn_.name));
    if (body.args.size() != fn_.params.size())
      throw VerifyError(fmt::format("verify: function @{} has {} params but its body has {} arguments", fn_.name,
                                    fn_.params.size(), body.args.size()));
    for (size_t i = 0; i < body.args.size(); ++i) {
      const Value &a = *body.args[i];
      if (a.type != fn_.params[i].type)
        throw VerifyError(fmt::format("verify: function @{}: param {} ('{}') is declared {} but its body argument is {}",
                                      fn_.name, i, fn_.params[i].name, fn_.params[i].type.str(), a.type.str()));
      if (!a.type.is_scalar())
        throw VerifyError(fmt::format("verify: function @{}: param {} ('{}') must be a scalar, not {}", fn_.name, i,
                                      fn_.params[i].name, a.type.str()));
    }
    scopes_.emplace_back();
    check_block(body, nullptr);
  }

 private:
  [[noreturn]] void fail(const Op &op, const std::string &what) const {
    throw VerifyError(fmt::format("verify: {} in function @{}: `{}` at {}", what, fn_.name,
                                  detail::print_op_line(op, names_, false), op.loc.str()));
  }

  bool visible(const Value *v) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (it->count(v)) return true;
    return false;
  }

  void check_block(const Block &b, const Op *parent) {
    if (b.parent != parent) {
      if (parent) fail(*parent, "a region's parent pointer does not point at its op");
      throw VerifyError(fmt::format("verify: function @{}: the body block has a parent op", fn_.name));
    }
    for (size_t i = 0; i < b.args.size(); ++i) {
      const Value *a = b.args[i].get();
      if (a->block != &b || a->def != nullptr || a->index != int(i)) {
        if (parent) fail(*parent, fmt::format("region argument {} has wrong owner links", i));
        throw VerifyError(fmt::format("verify: function @{}: body argument {} has wrong owner links", fn_.name, i));
      }
      scopes_.back().insert(a);
    }
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op &op = *b.ops[i];
      if (op.parent != &b) fail(op, "the op's parent pointer does not point at its block");
      if (op.kind == OpKind::Yield) {
        if (!parent) fail(op, "yield appears in the function body (yield only ends for/if regions)");
        if (i + 1 != b.ops.size()) fail(op, "yield is not the last op of its region");
      }
      check_op(op);
      for (size_t r = 0; r < op.regions.size(); ++r) {
        scopes_.emplace_back();
        check_block(*op.regions[r], &op);
        scopes_.pop_back();
      }
      for (auto &res : op.results) scopes_.back().insert(res.get());
    }
    if (parent && (b.ops.empty() || b.ops.back()->kind != OpKind::Yield))
      fail(*parent, "a region does not end with yield");
  }

  // ---- helpers for type checks ----
  static std::string ts(const Value *v) { return v->type.str(); }
  void expect_results(const Op &op, int n) {
    if (op.num_results() != n) fail(op, fmt::format("'{}' must have {} result(s), not {}", op_name(op.kind), n, op.num_results()));
  }
  void expect_same_type(const Op &op, const Value *a, const Value *b, const char *what) {
    if (a->type != b->type) fail(op, fmt::format("'{}' {} differ: {} vs {}", op_name(op.kind), what, ts(a), ts(b)));
  }
  void expect_not_ptr(const Op &op, const Value *v) {
    if (v->type.is_ptr()) fail(op, fmt::format("'{}' does not accept pointer tiles ({})", op_name(op.kind), ts(v)));
  }
  void expect_float(const Op &op, const Value *v) {
    if (v->type.is_ptr() || !is_float(v->type.dtype()))
      fail(op, fmt::format("'{}' needs a float tile, not {}", op_name(op.kind), ts(v)));
  }
  void expect_int(const Op &op, const Value *v) {
    if (v->type.is_ptr() || !is_int(v->type.dtype()))
      fail(op, fmt::format("'{}' needs an integer tile, not {}", op_name(op.kind), ts(v)));
  }
  void expect_i1_like(const Op &op, const Value *mask, const Value *like, const char *what) {
    if (mask->type.is_ptr() || mask->type.dtype() != DType::i1 || mask->type.shape != like->type.shape)
      fail(op, fmt::format("'{}' {} must be i1 of shape {}, not {}", op_name(op.kind), what,
                           shape_str(like->type.shape), ts(mask)));
  }
  void expect_shape(const Op &op, const std::vector<int64_t> &want) {
    if (op.result()->type.shape != want)
      fail(op, fmt::format("'{}' result shape must be {}, not {}", op_name(op.kind), shape_str(want),
                           shape_str(op.result()->type.shape)));
  }
  void expect_same_elem(const Op &op, const Value *src) {
    if (op.result()->type.elem != src->type.elem)
      fail(op, fmt::format("'{}' result element type {} differs from its source's {}", op_name(op.kind),
                           elem_type_name(op.result()->type.elem), elem_type_name(src->type.elem)));
  }
  /// The yield ending `region` must yield exactly `types`.
  void check_yield(const Op &op, const Block &region, const char *which) {
    if (region.ops.empty() || region.ops.back()->kind != OpKind::Yield) {
      for (auto &o : region.ops)
        if (o->kind == OpKind::Yield) fail(*o, "yield is not the last op of its region");
      fail(op, fmt::format("the {} region does not end with yield", which));
    }
    const Op &y = *region.ops.back();
    if (y.num_operands() != op.num_results())
      fail(op, fmt::format("the {} region yields {} value(s) but the op has {} result(s)", which, y.num_operands(), op.num_results()));
    for (int i = 0; i < y.num_operands(); ++i)
      if (y.operand(i)->type != op.result(i)->type)
        fail(op, fmt::format("the {} region yields {} at position {} but result {} is {}", which, ts(y.operand(i)), i, i,
                             op.result(i)->type.str()));
  }

  void check_op(const Op &op) {
    const char *name = op_name(op.kind);
    int lo = op_min_operands(op.kind), hi = op_max_operands(op.kind);
    if (op.num_operands() < lo || (hi >= 0 && op.num_operands() > hi)) {
      std::string range = hi < 0 ? fmt::format("at least {}", lo) : lo == hi ? fmt::format("{}", lo) : fmt::format("{} to {}", lo, hi);
      fail(op, fmt::format("'{}' takes {} operand(s), not {}", name, range, op.num_operands()));
    }
    if (int(op.regions.size()) != op_num_regions(op.kind))
      fail(op, fmt::format("'{}' must have {} region(s), not {}", name, op_num_regions(op.kind), op.regions.size()));
    for (int i = 0; i < op.num_operands(); ++i) {
      const Value *v = op.operand(i);
      if (!v) fail(op, fmt::format("operand {} of '{}' is null", i, name));
      if (!visible(v))
        fail(op, fmt::format("operand {} ({}) of '{}' is not defined before this use in an enclosing scope", i,
                             names_.name(v), name));
    }
    for (int i = 0; i < op.num_results(); ++i) {
      const Value *r = op.result(i);
      if (r->def != &op || r->index != i) fail(op, fmt::format("result {} of '{}' has wrong owner links", i, name));
      // As the DSL makes them (dsl/semantic.cpp): powers of two, at most 2^20 elements in a tile.
      int64_t elements = 1;
      for (int64_t d : r->type.shape) {
        if (!is_pow2(d))
          fail(op, fmt::format("result {} of '{}' has a dimension of size {} (must be a power of two)", i, name, d));
        elements = d > kMaxTileElements ? kMaxTileElements + 1 : elements * d;
        if (elements > kMaxTileElements)
          fail(op, fmt::format("result {} of '{}' has more than 2^20 elements ({})", i, name, r->type.str()));
      }
    }
    check_types(op);
  }

  void check_types(const Op &op) {
    const char *name = op_name(op.kind);
    switch (op.kind) {
      case OpKind::Constant: {
        expect_results(op, 1);
        expect_not_ptr(op, op.result());
        // A constant holds a value of its dtype, as the DSL makes it (integers signed, as folding wraps them; floats
        // rounded to the dtype), so that folding, the interpreter and codegen read the same number.
        const DType dt = op.result()->type.dtype();
        const int64_t v = op.attrs.ivalue;
        if (is_int(dt) && (v < numerics::int_min(dt) || v > numerics::int_max(dt)))
          fail(op, fmt::format("'constant' {} does not fit {}", v, dtype_name(dt)));
        const double f = op.attrs.fvalue;
        if (is_float(dt) && !std::isnan(f) && numerics::round_float(f, dt) != f)
          fail(op, fmt::format("'constant' {} is not a {} value (it rounds to {})", f, dtype_name(dt),
                               numerics::round_float(f, dt)));
        break;
      }
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
        expect_results(op, 1);
        if (op.attrs.axis < 0 || op.attrs.axis > 2) fail(op, fmt::format("'{}' axis {} is not 0, 1 or 2", name, op.attrs.axis));
        if (op.result()->type != Type{{}, {DType::i32}}) fail(op, fmt::format("'{}' must produce an i32 scalar, not {}", name, ts(op.result())));
        break;
      case OpKind::Arange: {
        expect_results(op, 1);
        if (op.attrs.ints.size() != 2 || op.attrs.ints[1] <= op.attrs.ints[0] ||
            op.attrs.ints[0] < numerics::int_min(DType::i32) || op.attrs.ints[1] - 1 > numerics::int_max(DType::i32))
          fail(op, "'arange' needs attrs {start, end} with end > start, its values i32");
        Type want{{op.attrs.ints[1] - op.attrs.ints[0]}, {DType::i32}};
        if (op.result()->type != want) fail(op, fmt::format("'arange' must produce {}, not {}", want.str(), ts(op.result())));
        break;
      }
      case OpKind::Splat:
        expect_results(op, 1);
        if (!op.operand(0)->type.is_scalar()) fail(op, fmt::format("'splat' source must be a scalar, not {}", ts(op.operand(0))));
        expect_same_elem(op, op.operand(0));
        break;
      case OpKind::Broadcast: {
        expect_results(op, 1);
        const auto &src = op.operand(0)->type.shape, &dst = op.result()->type.shape;
        expect_same_elem(op, op.operand(0));
        bool ok = src.size() == dst.size();
        for (size_t i = 0; ok && i < src.size(); ++i) ok = src[i] == dst[i] || src[i] == 1;
        if (!ok) fail(op, fmt::format("'broadcast' cannot stretch {} to {} (same rank; only size-1 dims stretch)", shape_str(src), shape_str(dst)));
        break;
      }
      case OpKind::ExpandDims: {
        expect_results(op, 1);
        auto shape = op.operand(0)->type.shape;
        if (op.attrs.axis < 0 || op.attrs.axis > int64_t(shape.size()))
          fail(op, fmt::format("'expand_dims' axis {} is out of range for a rank-{} source", op.attrs.axis, shape.size()));
        shape.insert(shape.begin() + op.attrs.axis, 1);
        expect_shape(op, shape);
        expect_same_elem(op, op.operand(0));
        break;
      }
      case OpKind::Reshape:
        expect_results(op, 1);
        expect_same_elem(op, op.operand(0));
        if (op.result()->type.numel() != op.operand(0)->type.numel())
          fail(op, fmt::format("'reshape' changes the number of elements ({} to {})", shape_str(op.operand(0)->type.shape),
                               shape_str(op.result()->type.shape)));
        break;
      case OpKind::Trans: {
        expect_results(op, 1);
        const auto &src = op.operand(0)->type.shape;
        const auto &perm = op.attrs.ints;
        std::vector<int64_t> sorted(perm), iota(src.size());
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 0; i < iota.size(); ++i) iota[i] = int64_t(i);
        if (sorted != iota) fail(op, fmt::format("'trans' permutation [{}] is not a permutation of {} dims", fmt::join(perm, ", "), src.size()));
        std::vector<int64_t> want;
        for (auto p : perm) want.push_back(src[size_t(p)]);
        expect_shape(op, want);
        expect_same_elem(op, op.operand(0));
        break;
      }
      case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Rem:
      case OpKind::Minimum: case OpKind::Maximum:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.operand(1), "operand types");
        expect_same_type(op, op.operand(0), op.result(), "operand and result types");
        expect_not_ptr(op, op.result());
        break;
      case OpKind::And: case OpKind::Or: case OpKind::Xor: case OpKind::Shl: case OpKind::Shr:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.operand(1), "operand types");
        expect_same_type(op, op.operand(0), op.result(), "operand and result types");
        expect_int(op, op.result());
        break;
      case OpKind::Cmp:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.operand(1), "operand types");
        if (op.result()->type != Type{op.operand(0)->type.shape, {DType::i1}})
          fail(op, fmt::format("'cmp' must produce i1 of shape {}, not {}", shape_str(op.operand(0)->type.shape), ts(op.result())));
        break;
      case OpKind::Neg: case OpKind::Abs:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.result(), "operand and result types");
        expect_not_ptr(op, op.result());
        break;
      case OpKind::Not:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.result(), "operand and result types");
        expect_int(op, op.result());
        break;
      case OpKind::Exp: case OpKind::Exp2: case OpKind::Log: case OpKind::Log2: case OpKind::Sqrt:
      case OpKind::Rsqrt: case OpKind::Tanh: case OpKind::Sigmoid:
        expect_results(op, 1);
        expect_same_type(op, op.operand(0), op.result(), "operand and result types");
        expect_float(op, op.result());
        break;
      case OpKind::Fma:
        expect_results(op, 1);
        for (int i = 0; i < 3; ++i) expect_same_type(op, op.operand(i), op.result(), "operand and result types");
        expect_float(op, op.result());
        if (op.attrs.flag) {  // fma_index: its first factor is the index cast itself (codegen splits it)
          const Op *d = op.operand(0)->def;
          if (!d || d->kind != OpKind::Cast || !d->attrs.flag)
            fail(op, "'fma' {split} needs an index cast ('cast' {index}) as its first operand");
        }
        break;
      case OpKind::Select:
        expect_results(op, 1);
        expect_i1_like(op, op.operand(0), op.result(), "condition");
        expect_same_type(op, op.operand(1), op.operand(2), "value operand types");
        expect_same_type(op, op.operand(1), op.result(), "value operand and result types");
        break;
      case OpKind::Cast: {
        expect_results(op, 1);
        expect_shape(op, op.operand(0)->type.shape);
        // Pointers convert only to pointers (a pointee change) or to/from i64 (the address).
        const Type &from = op.operand(0)->type, &to = op.result()->type;
        auto addr_like = [](const Type &t) { return t.is_ptr() || t.dtype() == DType::i64; };
        if ((from.is_ptr() || to.is_ptr()) && !(addr_like(from) && addr_like(to)))
          fail(op, fmt::format("'cast' between {} and {}: pointers cast only to pointers or i64", from.str(), to.str()));
        if (op.attrs.flag && (from.is_ptr() || from.dtype() != DType::i32 || to.is_ptr() || to.dtype() != DType::f32))
          fail(op, fmt::format("'cast' {{index}} converts i32 to f32, not {} to {}", from.str(), to.str()));
        break;
      }
      case OpKind::PtrAdd:
        expect_results(op, 1);
        if (!op.operand(0)->type.is_ptr()) fail(op, fmt::format("'ptr_add' operand 0 must be a pointer tile, not {}", ts(op.operand(0))));
        expect_int(op, op.operand(1));
        if (op.operand(1)->type.dtype() == DType::i1) fail(op, "'ptr_add' offset must be i8..i64, not i1");
        if (op.operand(1)->type.shape != op.operand(0)->type.shape)
          fail(op, fmt::format("'ptr_add' offset shape {} differs from the pointer shape {}", shape_str(op.operand(1)->type.shape),
                               shape_str(op.operand(0)->type.shape)));
        expect_same_type(op, op.operand(0), op.result(), "pointer and result types");
        break;
      case OpKind::Load: {
        expect_results(op, 1);
        const Value *ptr = op.operand(0);
        if (!ptr->type.is_ptr()) fail(op, fmt::format("'load' operand 0 must be a pointer tile, not {}", ts(ptr)));
        Type value{ptr->type.shape, {ptr->type.dtype()}};
        if (op.result()->type != value) fail(op, fmt::format("'load' of {} must produce {}, not {}", ts(ptr), value.str(), ts(op.result())));
        if (op.num_operands() >= 2) expect_i1_like(op, op.operand(1), ptr, "mask");
        if (op.num_operands() == 3 && op.operand(2)->type != value)
          fail(op, fmt::format("'load' other value must be {}, not {}", value.str(), ts(op.operand(2))));
        break;
      }
      case OpKind::Store:
      case OpKind::AtomicAdd: {
        expect_results(op, op.kind == OpKind::Store ? 0 : 1);
        const Value *ptr = op.operand(0);
        if (!ptr->type.is_ptr()) fail(op, fmt::format("'{}' operand 0 must be a pointer tile, not {}", name, ts(ptr)));
        Type value{ptr->type.shape, {ptr->type.dtype()}};
        if (op.operand(1)->type != value)
          fail(op, fmt::format("'{}' through {} needs a value of type {}, not {}", name, ts(ptr), value.str(), ts(op.operand(1))));
        if (op.num_operands() == 3) expect_i1_like(op, op.operand(2), ptr, "mask");
        if (op.kind == OpKind::AtomicAdd) expect_same_type(op, op.operand(1), op.result(), "value and result types");
        break;
      }
      case OpKind::Reduce:
      case OpKind::ArgReduce: {
        expect_results(op, 1);
        auto shape = op.operand(0)->type.shape;
        expect_not_ptr(op, op.operand(0));
        if (op.attrs.axis < 0 || op.attrs.axis >= int64_t(shape.size()))
          fail(op, fmt::format("'{}' axis {} is out of range for a {} tile", name, op.attrs.axis, ts(op.operand(0))));
        shape.erase(shape.begin() + op.attrs.axis);
        expect_shape(op, shape);
        if (op.kind == OpKind::Reduce) {
          expect_same_elem(op, op.operand(0));
        } else {
          if (op.attrs.reduce == ReduceKind::sum) fail(op, "'arg_reduce' kind must be max or min, not sum");
          if (op.result()->type.elem != ElemType{DType::i32}) fail(op, fmt::format("'arg_reduce' must produce i32 indices, not {}", ts(op.result())));
        }
        break;
      }
      case OpKind::Dot: {
        expect_results(op, 1);
        const Type &a = op.operand(0)->type, &b = op.operand(1)->type, &c = op.operand(2)->type;
        if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2 || a.shape[1] != b.shape[0] || c.shape[0] != a.shape[0] ||
            c.shape[1] != b.shape[1])
          fail(op, fmt::format("'dot' shapes do not match [M,K] x [K,N] + [M,N]: {} x {} + {}", a.str(), b.str(), c.str()));
        if (a.is_ptr() || b.is_ptr() || a.dtype() != b.dtype() || !is_float(a.dtype()))
          fail(op, fmt::format("'dot' operands must be float tiles of one dtype, not {} and {}", a.str(), b.str()));
        if (c.is_ptr() || c.dtype() != DType::f32) fail(op, fmt::format("'dot' accumulator must be f32, not {}", c.str()));
        expect_same_type(op, op.operand(2), op.result(), "accumulator and result types");
        break;
      }
      case OpKind::For: {
        const Value *lb = op.operand(0), *ub = op.operand(1), *step = op.operand(2);
        for (const Value *v : {lb, ub, step})
          if (!v->type.is_scalar() || v->type.is_ptr() || !is_int(v->type.dtype()) || v->type.dtype() == DType::i1)
            fail(op, fmt::format("'for' bounds and step must be integer scalars, not {}", ts(v)));
        if (lb->type != ub->type || lb->type != step->type)
          fail(op, fmt::format("'for' bounds and step have different types: {}, {}, {}", ts(lb), ts(ub), ts(step)));
        int carried = op.num_operands() - 3;
        expect_results(op, carried);
        const Block &body = *op.region(0);
        if (int(body.args.size()) != carried + 1)
          fail(op, fmt::format("'for' region has {} argument(s); it needs the induction variable plus {} carried", body.args.size(), carried));
        if (body.arg(0)->type != lb->type)
          fail(op, fmt::format("'for' induction variable is {} but the bounds are {}", ts(body.arg(0)), ts(lb)));
        for (int i = 0; i < carried; ++i) {
          const Value *init = op.operand(3 + i);
          if (body.arg(i + 1)->type != init->type || op.result(i)->type != init->type)
            fail(op, fmt::format("'for' carried value {} has init {}, region argument {} and result {}", i, ts(init),
                                 ts(body.arg(i + 1)), op.result(i)->type.str()));
        }
        check_yield(op, body, "loop body");
        break;
      }
      case OpKind::If: {
        const Value *cond = op.operand(0);
        if (cond->type != Type{{}, {DType::i1}}) fail(op, fmt::format("'if' condition must be an i1 scalar, not {}", ts(cond)));
        for (int r = 0; r < 2; ++r)
          if (!op.region(r)->args.empty()) fail(op, fmt::format("'if' {} region must have no arguments", r ? "else" : "then"));
        check_yield(op, *op.region(0), "then");
        check_yield(op, *op.region(1), "else");
        break;
      }
      case OpKind::Yield: {
        expect_results(op, 0);
        const Op *owner = op.parent ? op.parent->parent : nullptr;
        if (!owner || (owner->kind != OpKind::For && owner->kind != OpKind::If))
          fail(op, "yield is only allowed as the terminator of a for or if region");
        break;  // operand types are checked against the owner's results in check_yield
      }
    }
  }

  const Function &fn_;
  detail::ValueNamer names_;
  std::vector<std::unordered_set<const Value *>> scopes_;  // values visible at the current point
};

}  // namespace

void verify(const Function &fn) { Verifier(fn).run(); }

}  // namespace tilejit::ir
