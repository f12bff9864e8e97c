// The textual form of the tile IR. print(fn) is a compile-cache key: it must be deterministic and must
// show everything that changes the generated code (op kinds, attributes, types, parameter
// specializations), and nothing that does not (source locations, attribute fields an op does not read).
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "ir/passes.h"
#include "ir/printer_detail.h"

namespace tilejit::ir {
namespace detail {

namespace {
bool usable_param_name(const std::string &n) {
  if (n.empty()) return false;
  if (std::isdigit(static_cast<unsigned char>(n[0]))) return false;  // would clash with %0, %1, ...
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return n.rfind("arg", 0) != 0;  // %argN is the fallback spelling
}
}  // namespace

ValueNamer::ValueNamer(const Function &fn) {
  std::set<std::string> seen;
  for (size_t i = 0; i < fn.body->args.size(); ++i) {
    std::string n = i < fn.params.size() ? fn.params[i].name : fn.body->args[i]->name;
    if (!usable_param_name(n) || !seen.insert(n).second) n = fmt::format("arg{}", i);
    names_[fn.body->args[i].get()] = "%" + n;
  }
  number_block(*fn.body);
}

void ValueNamer::number_block(const Block &b) {
  for (auto &op : b.ops) {
    if (op->num_results() > 0) {
      int n = next_++;
      op_numbers_[op.get()] = n;
      for (int i = 0; i < op->num_results(); ++i)
        names_[op->result(i)] = op->num_results() == 1 ? fmt::format("%{}", n) : fmt::format("%{}#{}", n, i);
    }
    for (auto &region : op->regions) {
      for (auto &arg : region->args) names_[arg.get()] = fmt::format("%{}", next_++);
      number_block(*region);
    }
  }
}

std::string ValueNamer::name(const Value *v) const {
  auto it = names_.find(v);
  return it == names_.end() ? "%<undefined>" : it->second;
}

std::string ValueNamer::result_group(const Op &op) const {
  auto it = op_numbers_.find(&op);
  if (it == op_numbers_.end()) return "";
  return op.num_results() == 1 ? fmt::format("%{}", it->second)
                               : fmt::format("%{}:{}", it->second, op.num_results());
}

namespace {

std::string operand_list(const Op &op, const ValueNamer &names, int from = 0, int to = -1) {
  std::string s;
  if (to < 0) to = op.num_operands();
  for (int i = from; i < to; ++i) s += (i > from ? ", " : "") + names.name(op.operand(i));
  return s;
}

using Annotate = std::function<std::string(const Value *)>;

/// v's type, with the annotation inside a tensor type's brackets.
std::string type_text(const Value *v, const Annotate *annotate) {
  std::string t = v->type.str();
  if (!annotate || !*annotate || t.empty() || t.back() != '>') return t;
  const std::string a = (*annotate)(v);
  if (a.empty()) return t;
  t.pop_back();
  return t + ", " + a + ">";
}

std::string type_list(const Op &op, const Annotate *annotate) {
  std::string s;
  for (int i = 0; i < op.num_results(); ++i) s += (i ? ", " : "") + type_text(op.result(i), annotate);
  return s;
}

std::string constant_value(const Op &op) {
  if (op.num_results() == 1 && is_float(op.result()->type.dtype())) return fmt::format("{}", op.attrs.fvalue);
  return fmt::format("{}", op.attrs.ivalue);
}

/// The attributes `kind` reads (see ops.def), as " {k = v, ...}", or "".
std::string attr_text(const Op &op) {
  const Attrs &a = op.attrs;
  switch (op.kind) {
    case OpKind::Constant: return fmt::format(" {{value = {}}}", constant_value(op));
    case OpKind::ProgramId:
    case OpKind::NumPrograms:
    case OpKind::ExpandDims: return fmt::format(" {{axis = {}}}", a.axis);
    case OpKind::Arange:
      if (a.ints.size() == 2) return fmt::format(" {{start = {}, end = {}}}", a.ints[0], a.ints[1]);
      return fmt::format(" {{range = [{}]}}", fmt::join(a.ints, ", "));
    case OpKind::Trans: return fmt::format(" {{perm = [{}]}}", fmt::join(a.ints, ", "));
    case OpKind::Cmp: return fmt::format(" {{pred = {}}}", cmp_pred_name(a.pred));
    case OpKind::Reduce:
    case OpKind::ArgReduce:
      return fmt::format(" {{axis = {}, kind = {}}}", a.axis, reduce_kind_name(a.reduce));
    default: {
      const char *flag = op_flag_name(op.kind);
      return flag && a.flag ? fmt::format(" {{{}}}", flag) : "";
    }
  }
}

std::string loc_text(const Op &op) {
  if (!op.loc.file || !*op.loc.file) return " loc(unknown)";
  return fmt::format(" loc({}:{}:{})", op.loc.file, op.loc.line, op.loc.column);
}

}  // namespace

std::string print_op_line(const Op &op, const ValueNamer &names, bool with_loc, const Annotate *annotate) {
  std::string lhs = names.result_group(op);
  if (!lhs.empty()) lhs += " = ";
  std::string s;
  switch (op.kind) {
    case OpKind::For: {
      const Block *body = op.regions.empty() ? nullptr : op.region(0);
      auto arg = [&](int i) {
        return body && i < int(body->args.size()) ? names.name(body->arg(i)) : std::string("%<missing>");
      };
      if (op.num_operands() < 3) {
        s = fmt::format("{}for <{} operands>", lhs, op.num_operands());
      } else {
        s = fmt::format("{}for {} = {} to {} step {}", lhs, arg(0), names.name(op.operand(0)),
                        names.name(op.operand(1)), names.name(op.operand(2)));
        if (op.num_operands() > 3) {
          s += " iter_args(";
          for (int i = 3; i < op.num_operands(); ++i)
            s += fmt::format("{}{} = {}", i > 3 ? ", " : "", arg(i - 2), names.name(op.operand(i)));
          s += ")";
        }
      }
      if (op.num_results() > 0) s += fmt::format(" -> ({})", type_list(op, annotate));
      s += " {";
      break;
    }
    case OpKind::If:
      s = fmt::format("{}if {}", lhs, operand_list(op, names));
      if (op.num_results() > 0) s += fmt::format(" -> ({})", type_list(op, annotate));
      s += " {";
      break;
    case OpKind::Yield:
      s = op.num_operands() ? "yield " + operand_list(op, names) : "yield";
      break;
    default: {
      s = lhs + op_name(op.kind);
      if (op.num_operands() > 0) s += " " + operand_list(op, names);
      s += attr_text(op);
      if (op.kind == OpKind::Cast && op.num_operands() == 1 && op.num_results() == 1)
        s += fmt::format(" : {} -> {}", op.operand(0)->type.str(), type_text(op.result(), annotate));
      else if (op.num_results() > 0)
        s += " : " + type_list(op, annotate);
      // Ops without a result (store) show the value's type so the line reads on its own.
      else if (op.num_operands() > 1)
        s += " : " + op.operand(1)->type.str();
      if (!op.regions.empty()) s += " {";  // only in broken IR: ops.def gives these ops no region
    }
  }
  if (with_loc) s += loc_text(op);
  return s;
}

namespace {

using Comment = std::function<std::string(const Op *)>;

void print_block(const Block &b, const ValueNamer &names, bool with_loc, int indent, std::string &out,
                 const Annotate *annotate, const Comment *comment) {
  std::string pad(size_t(indent) * 2, ' ');
  for (auto &op : b.ops) {
    out += pad + print_op_line(*op, names, with_loc, annotate);
    if (comment && *comment)
      if (std::string c = (*comment)(op.get()); !c.empty()) out += "  // " + c;
    out += "\n";
    for (size_t r = 0; r < op->regions.size(); ++r) {
      if (r > 0) out += pad + "} else {\n";
      print_block(*op->regions[r], names, with_loc, indent + 1, out, annotate, comment);
    }
    if (!op->regions.empty()) out += pad + "}\n";
  }
}

std::string print_function(const Function &fn, bool with_loc, const Annotate *annotate = nullptr,
                           const Comment *comment = nullptr) {
  ValueNamer names(fn);
  std::string out = fmt::format("tt.func @{}(", fn.name);
  for (size_t i = 0; i < fn.body->args.size(); ++i) {
    const Value *arg = fn.body->arg(int(i));
    out += fmt::format("{}{}: {}", i ? ", " : "", names.name(arg), arg->type.str());
    if (i < fn.params.size()) {
      const ParamInfo &p = fn.params[i];
      if (p.type != arg->type) out += fmt::format(" (param type {})", p.type.str());
      if (p.align16 && p.div16) out += " {align16, div16}";
      else if (p.align16) out += " {align16}";
      else if (p.div16) out += " {div16}";
    }
  }
  out += ") {\n";
  print_block(*fn.body, names, with_loc, 1, out, annotate, comment);
  out += "}\n";
  return out;
}

}  // namespace
}  // namespace detail

std::string print(const Function &fn) { return detail::print_function(fn, false); }
std::string print_with_locations(const Function &fn) { return detail::print_function(fn, true); }
std::string print_annotated(const Function &fn, const TypeAnnotator &annotate, const OpAnnotator &comment) {
  return detail::print_function(fn, false, &annotate, &comment);
}

}  // namespace tilejit::ir
