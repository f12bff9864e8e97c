#include "dsl/trace_context.h"

#include <atomic>

#include <fmt/format.h>

#include "tilejit/error.h"

namespace tilejit::dsl {

namespace {
thread_local TraceContext *g_current = nullptr;
std::atomic<uint32_t> g_generation{0};
}  // namespace

TraceContext::TraceContext(ir::Function &f, std::vector<ir::Value *> p, std::vector<Tile> c)
    : fn(f),
      builder(f.body.get()),
      generation(++g_generation),
      params(std::move(p)),
      constants(std::move(c)),
      previous_(g_current) {
  g_current = this;
}

TraceContext::~TraceContext() { g_current = previous_; }

TraceContext *TraceContext::current() { return g_current; }

TraceContext &TraceContext::require(const char *op, const std::source_location &loc) {
  if (!g_current)
    throw TraceError(fmt::format("{}: called outside a kernel trace (tile ops only work inside the lambda "
                                 "given to Kernel) at {}:{}",
                                 op, loc.file_name(), loc.line()));
  return *g_current;
}

uint32_t TileAccess::current_generation() { return g_current ? g_current->generation : 0; }

void TileAccess::check_current(const Tile &t) {
  if (!g_current)
    throw TraceError("a Tile was used outside its kernel's trace: tiles exist only while the kernel body runs "
                     "(inside the lambda given to Kernel)");
  if (t.value_gen_ != g_current->generation)
    throw TraceError("a Tile from an earlier trace was used: tiles live only during the trace that made them "
                     "(was one kept in a static, global or captured variable?)");
}

Tile TileAccess::from_value(ir::Value *v) {
  Tile t;
  set_value(t, v);
  return t;
}

void TileAccess::register_handle(Tile &t) {
  TraceContext *ctx = g_current;
  if (!ctx) return;  // handles made outside a trace (host code) are never tracked
  t.handle_id_ = ctx->next_handle_id++;
  t.trace_gen_ = ctx->generation;
  ctx->handles.emplace(t.handle_id_, &t);
}

void TileAccess::unregister_handle(Tile &t) {
  if (t.handle_id_ == 0) return;
  // Find the (possibly enclosing) trace that registered it; a trace that has ended has nothing to remove.
  for (TraceContext *ctx = g_current; ctx; ctx = ctx->previous_) {
    if (ctx->generation == t.trace_gen_) {
      ctx->handles.erase(t.handle_id_);
      break;
    }
  }
  t.handle_id_ = 0;
}

}  // namespace tilejit::dsl
