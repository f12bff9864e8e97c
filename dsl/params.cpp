// Kernel parameters as tiles: the handles a traced lambda receives for its runtime parameters.
#include <fmt/format.h>

#include "dsl/trace_context.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"

namespace tilejit::detail {

Tile param_tile(int index) {
  auto *ctx = dsl::TraceContext::current();
  if (!ctx || index < 0 || size_t(index) >= ctx->params.size() || !ctx->params[size_t(index)])
    throw TraceError(fmt::format("kernel parameter {} requested outside its kernel's trace", index));
  return dsl::TileAccess::from_value(ctx->params[size_t(index)]);
}

}  // namespace tilejit::detail
