#include "interp/program.h"

#include <fmt/format.h>

#include <unordered_map>

#include "tilejit/error.h"

namespace tilejit::interp {
namespace {

class Compiler {
 public:
  explicit Compiler(Program &p) : prog_(p) {}

  void block(const ir::Block &b, Body &out) {
    for (auto &a : b.args) out.args.push_back(define(a.get()));
    for (auto &op : b.ops) {
      if (op->kind == ir::OpKind::Yield) {
        for (auto *v : op->operands) out.yields.push_back(use(v, *op));
        continue;  // a yield ends its block; anything after it is unreachable
      }
      Instr in;
      in.op = op.get();
      in.kind = op->kind;
      for (auto *v : op->operands) in.in.push_back(use(v, *op));
      // Regions before results: region values are not visible after the op, results are.
      for (auto &r : op->regions) {
        in.regions.push_back(std::make_unique<Body>());
        block(*r, *in.regions.back());
      }
      for (auto &r : op->results) in.out.push_back(define(r.get()));
      out.instrs.push_back(std::move(in));
    }
  }

 private:
  int define(const ir::Value *v) {
    const int slot = int(prog_.slot_types.size());
    prog_.slot_types.push_back(&v->type);
    slots_[v] = slot;
    return slot;
  }
  int use(const ir::Value *v, const ir::Op &op) {
    auto it = slots_.find(v);
    if (it == slots_.end())
      throw InterpError(fmt::format("{} at {}: operand of type {} is used before it is defined (invalid IR)",
                                    ir::op_name(op.kind), op.loc.str(), v ? v->type.str() : "<null>"));
    return it->second;
  }

  Program &prog_;
  std::unordered_map<const ir::Value *, int> slots_;
};

}  // namespace

Program compile(const ir::Function &fn) {
  Program p;
  Compiler(p).block(*fn.body, p.body);
  return p;
}

}  // namespace tilejit::interp
