#include "ir/ir.h"

#include <fmt/format.h>

#include "ir/builder.h"
#include "tilejit/error.h"

namespace tilejit {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::i1: case DType::i8: return 1;
    case DType::i16: case DType::f16: case DType::bf16: return 2;
    case DType::i32: case DType::f32: return 4;
    case DType::i64: case DType::f64: return 8;
  }
  return 0;
}
int dtype_bits(DType t) { return t == DType::i1 ? 1 : 8 * dtype_bytes(t); }
bool is_float(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}
bool is_int(DType t) { return !is_float(t); }
std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::i1: return "i1";
    case DType::i8: return "i8";
    case DType::i16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}
DType parse_dtype(std::string_view name) {
  for (DType t : {DType::i1, DType::i8, DType::i16, DType::i32, DType::i64, DType::f16, DType::bf16,
                  DType::f32, DType::f64})
    if (dtype_name(t) == name) return t;
  throw Error(fmt::format("unknown dtype '{}' (expected one of i1 i8 i16 i32 i64 f16 bf16 f32 f64)", name));
}
std::string elem_type_name(ElemType t) {
  return t.is_ptr ? fmt::format("ptr<{}>", dtype_name(t.dtype)) : std::string(dtype_name(t.dtype));
}

namespace ir {

std::string SourceLoc::str() const {
  if (!file || !*file) return "<unknown>";
  return fmt::format("{}:{}", file, line);
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}
std::string shape_str(const std::vector<int64_t> &shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}
std::string Type::str() const {
  if (shape.empty()) return elem_type_name(elem);
  return fmt::format("tensor<{}x{}>", shape_str(shape), elem_type_name(elem));
}

namespace {
struct OpInfo { const char *name; int lo, hi, regions; uint8_t props; };
using namespace op_props;
constexpr OpInfo kOpInfo[] = {
#define OP(Name, text, lo, hi, regions, props) {text, lo, hi, regions, props},
#include "ir/ops.def"
#undef OP
};
bool has(OpKind k, uint8_t p) { return (kOpInfo[int(k)].props & p) == p; }
}  // namespace
const char *op_name(OpKind k) { return kOpInfo[int(k)].name; }
int op_min_operands(OpKind k) { return kOpInfo[int(k)].lo; }
int op_max_operands(OpKind k) { return kOpInfo[int(k)].hi; }
int op_num_regions(OpKind k) { return kOpInfo[int(k)].regions; }

const char *op_flag_name(OpKind k) {
  switch (k) {
    case OpKind::Dot: return "allow_tf32";
    case OpKind::Cast: return "index";
    case OpKind::Fma: return "split";
    case OpKind::Div:
    case OpKind::Mul: return "rn";
    case OpKind::AtomicAdd: return "acq_rel";
    default: return nullptr;
  }
}

std::vector<const char *> op_attribute_names(OpKind k) {
  switch (k) {
    case OpKind::Constant: return {"value"};
    case OpKind::ProgramId:
    case OpKind::NumPrograms:
    case OpKind::ExpandDims: return {"axis"};
    case OpKind::Arange: return {"start", "end"};
    case OpKind::Trans: return {"perm"};
    case OpKind::Cmp: return {"pred"};
    case OpKind::Reduce:
    case OpKind::ArgReduce: return {"axis", "kind"};
    default: return {};
  }
}
bool is_pure(OpKind k) { return has(k, Pure); }
bool is_elementwise(OpKind k) { return has(k, Elementwise); }
bool reads_memory(OpKind k) { return has(k, Reads); }
bool writes_memory(OpKind k) { return has(k, Writes); }

const char *cmp_pred_name(CmpPred p) {
  static const char *n[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return n[int(p)];
}
const char *reduce_kind_name(ReduceKind r) {
  static const char *n[] = {"sum", "max", "min"};
  return n[int(r)];
}

Value *Block::add_arg(Type t) {
  auto v = std::make_unique<Value>();
  v->type = std::move(t);
  v->block = this;
  v->index = int(args.size());
  args.push_back(std::move(v));
  return args.back().get();
}

Value *Op::add_result(Type t) {
  auto v = std::make_unique<Value>();
  v->type = std::move(t);
  v->def = this;
  v->index = int(results.size());
  results.push_back(std::move(v));
  return results.back().get();
}

Function::Function() : body(std::make_unique<Block>()) {}

void replace_all_uses(Block &b, Value *from, Value *to) {
  walk(b, [&](Op &op) {
    for (auto &o : op.operands)
      if (o == from) o = to;
  });
}

std::unordered_map<const Value *, int> use_counts(Block &b) {
  std::unordered_map<const Value *, int> n;
  walk(b, [&](Op &op) {
    for (const Value *o : op.operands) ++n[o];
  });
  return n;
}

Op *Builder::create(OpKind kind, std::vector<Value *> operands, std::vector<Type> result_types,
                    Attrs attrs, SourceLoc loc) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->operands = std::move(operands);
  op->attrs = std::move(attrs);
  op->loc = loc;
  op->parent = block_;
  for (auto &t : result_types) op->add_result(std::move(t));
  for (int i = 0; i < op_num_regions(kind); ++i) {
    op->regions.push_back(std::make_unique<Block>());
    op->regions.back()->parent = op.get();
  }
  Op *raw = op.get();
  block_->ops.insert(block_->ops.begin() + long(pos_), std::move(op));
  ++pos_;
  return raw;
}

}  // namespace ir
}  // namespace tilejit
