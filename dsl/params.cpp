// Kernel parameters as tiles: the handles a traced lambda receives for its runtime parameters.
#include <fmt/format.h>

#include "dsl/trace_context.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"

namespace tilejit::detail {

Tile param_tile(int index) {
  auto *ctx = dsl::TraceContext::current();
  if (!ctx) throw TraceError(fmt::format("kernel parameter {} requested outside a kernel's trace", index));
  if (index < 0 || size_t(index) >= ctx->params.size())
    throw TraceError(fmt::format("kernel {}: parameter {} requested; it has {}", ctx->fn.name, index,
                                 ctx->params.size()));
  if (ir::Value *v = ctx->params[size_t(index)]) return dsl::TileAccess::from_value(v);
  if (size_t(index) < ctx->constants.size() && ctx->constants[size_t(index)].valid())
    return ctx->constants[size_t(index)];
  throw TraceError(fmt::format("kernel {}: parameter {} has no value in this trace", ctx->fn.name, index));
}

}  // namespace tilejit::detail
