// Helpers for the DSL tests: trace a body into a fresh ir::Function without optimizing it, so the tests
// can inspect exactly the ops the DSL emitted.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "ir/passes.h"
#include "tilejit/tilejit.h"

namespace tilejit::dsl_testing {

inline ir::Type T(std::vector<int64_t> shape, DType d) { return ir::Type{std::move(shape), ElemType{d, false}}; }
inline ir::Type S(DType d) { return ir::Type{{}, ElemType{d, false}}; }
inline ir::Type P(DType d) { return ir::Type{{}, ElemType{d, true}}; }

/// Traces `body(param handles...)`: params are kernel parameters of the given types (use detail::param_tile
/// through param(i)). Returns the unoptimized function.
template <class F>
std::unique_ptr<ir::Function> trace(F &&body, std::vector<ir::Type> params = {}) {
  auto fn = std::make_unique<ir::Function>();
  fn->name = "test";
  std::vector<ir::Value *> values;
  for (size_t i = 0; i < params.size(); ++i) {
    fn->params.push_back(ir::ParamInfo{"p" + std::to_string(i), params[i]});
    values.push_back(fn->body->add_arg(params[i]));
    values.back()->name = fn->params.back().name;
  }
  {
    dsl::TraceContext ctx(*fn, values);
    body();
  }
  return fn;
}

inline Tile param(int i) { return detail::param_tile(i); }

/// All ops of `kind`, in program order (recursing into regions).
inline std::vector<ir::Op *> ops_of(ir::Function &fn, ir::OpKind kind) {
  std::vector<ir::Op *> out;
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == kind) out.push_back(&op);
  });
  return out;
}
inline int count(ir::Function &fn, ir::OpKind kind) { return int(ops_of(fn, kind).size()); }
/// The last op of the function body (not recursing).
inline ir::Op &last_op(ir::Function &fn) { return *fn.body->ops.back(); }

/// The value a handle holds (null for literals).
inline ir::Value *value_of(const Tile &t) { return dsl::TileAccess::value(t); }

}  // namespace tilejit::dsl_testing
