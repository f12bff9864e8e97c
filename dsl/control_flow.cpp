// for_range and if_: structured control flow with automatically carried values.
//
// Both snapshot the live handles of the trace (TraceContext::handles, in creation order) before tracing a
// body, and compare each handle's contents afterwards. for_range gives every handle holding an IR value a
// block argument; handles the body reassigned become For inits/yields/results, the others have their block
// argument replaced by the outer value and removed. if_ traces each branch from the same starting contents
// and turns handles changed in either branch into If results.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;
using State = dsl::TileAccess::State;

namespace {

ir::Value *loop_bound(TraceContext &ctx, const Tile &t, DType dt, const char *what, const SrcLoc &loc) {
  return dsl::materialize(ctx, t, dt, {}, "for_range", loc);
}

void check_bound(const Tile &t, const char *what, const SrcLoc &loc) {
  dsl::require_valid(t, "for_range", what, loc);
  bool ok = TileAccess::is_int_literal(t) ||
            (!t.is_literal() && !t.is_ptr() && t.rank() == 0 && is_int(t.dtype()) && t.dtype() != DType::i1);
  if (!ok)
    dsl::fail(loc, fmt::format("for_range: the {} must be an integer scalar, got {}", what, dsl::describe(t)));
}

/// One handle alive when a body starts.
struct Entry {
  uint64_t id;
  Tile *handle;
  State outer;
  ir::Value *arg = nullptr;  // for_range: its block argument (handles holding IR values only)
};

std::vector<Entry> snapshot(TraceContext &ctx) {
  std::vector<Entry> entries;
  for (auto &[id, h] : ctx.handles) entries.push_back({id, h, TileAccess::state(*h)});
  return entries;
}

/// The handle's contents now, or nullopt if it was destroyed during the body.
std::optional<State> current_state(TraceContext &ctx, const Entry &e) {
  if (!ctx.handles.count(e.id)) return std::nullopt;
  return TileAccess::state(*e.handle);
}

std::string describe_state(const State &s) { return dsl::describe(TileAccess::from_state(s)); }

}  // namespace

void for_range(const Tile &start, const Tile &end, const Tile &step, const std::function<void(I32)> &body,
               SrcLoc loc) {
  auto &ctx = TraceContext::require("for_range", loc);
  check_bound(start, "start", loc);
  check_bound(end, "end", loc);
  check_bound(step, "step", loc);
  // Loops count up (iv < end); a literal step that is not positive would never finish on the GPU.
  if (TileAccess::is_int_literal(step) && TileAccess::int_literal(step) <= 0)
    dsl::fail(loc, fmt::format("for_range: step must be positive, got {}", TileAccess::int_literal(step)));
  DType bt = DType::i32;
  for (const Tile *t : {&start, &end, &step})
    if ((t->is_literal() ? dsl::literal_dtype(*t) : t->dtype()) == DType::i64) bt = DType::i64;
  ir::Value *lb = loop_bound(ctx, start, bt, "start", loc);
  ir::Value *ub = loop_bound(ctx, end, bt, "end", loc);
  ir::Value *st = loop_bound(ctx, step, bt, "step", loc);

  ir::Op *loop = ctx.builder.create(ir::OpKind::For, {lb, ub, st}, {}, {}, dsl::ir_loc(loc));
  ir::Block *outer_block = ctx.builder.block();
  size_t outer_pos = ctx.builder.position();
  ir::Block *bb = loop->region(0);
  ir::Type iv_type;
  iv_type.elem.dtype = bt;
  ir::Value *iv = bb->add_arg(iv_type);

  // Every handle holding an IR value reads a block argument inside the body.
  std::vector<Entry> entries = snapshot(ctx);
  for (auto &e : entries) {
    if (!TileAccess::state_is_value(e.outer)) continue;
    e.arg = bb->add_arg(e.outer.value->type);
    TileAccess::set_value(*e.handle, e.arg);
  }

  ctx.builder.set_insertion_point_to_end(bb);
  body(I32(TileAccess::from_value(iv)));

  // Classify: carried (reassigned) or not.
  std::vector<ir::Value *> yields;
  std::vector<Entry *> carried, untouched;
  for (auto &e : entries) {
    std::optional<State> now = current_state(ctx, e);
    if (!e.arg) {
      if (now && !(*now == e.outer) && TileAccess::state_is_empty(e.outer))
        dsl::fail(loc, fmt::format("for_range: a Tile declared without a value before the loop was assigned inside "
                                   "it (now {}); give it an initial value (e.g. zeros()) before the loop so it can "
                                   "be carried",
                                   describe_state(*now)));
      if (now && !(*now == e.outer))
        dsl::fail(loc, fmt::format("for_range: a variable holding {} before the loop was reassigned inside it "
                                   "(now {}); only tiles can be carried by a loop: initialise it with full() or "
                                   "zeros() before the loop",
                                   describe_state(e.outer), describe_state(*now)));
      continue;
    }
    if (!now || (TileAccess::state_is_value(*now) && now->value == e.arg)) {
      untouched.push_back(&e);
      continue;
    }
    ir::Value *y;
    if (TileAccess::state_is_value(*now)) {
      y = now->value;
    } else if (TileAccess::state_is_literal(*now)) {
      y = dsl::materialize(ctx, TileAccess::from_state(*now), e.arg->type.dtype(), e.arg->type.shape, "for_range", loc);
    } else {
      dsl::fail(loc, fmt::format("for_range: a variable of type {} was reset to an empty Tile inside the loop",
                                 dsl::describe(e.arg->type)));
    }
    if (y->type != e.arg->type)
      dsl::fail(loc, fmt::format("for_range: a loop-carried variable changes type inside the loop: it enters as {} "
                                 "and is reassigned to {}; cast it to keep its type",
                                 dsl::describe(e.arg->type), dsl::describe(y->type)));
    yields.push_back(y);
    carried.push_back(&e);
  }
  ctx.builder.create(ir::OpKind::Yield, yields, {}, {}, dsl::ir_loc(loc));

  // Untouched handles: the body reads the outer value directly; drop their block arguments.
  for (Entry *e : untouched) ir::replace_all_uses(*bb, e->arg, e->outer.value);
  std::vector<std::unique_ptr<ir::Value>> kept;
  for (auto &a : bb->args) {
    bool drop = std::any_of(untouched.begin(), untouched.end(), [&](Entry *e) { return e->arg == a.get(); });
    if (!drop) kept.push_back(std::move(a));
  }
  bb->args = std::move(kept);
  for (size_t i = 0; i < bb->args.size(); ++i) bb->args[i]->index = int(i);

  for (Entry *e : carried) {
    loop->operands.push_back(e->outer.value);
    loop->add_result(e->arg->type);
  }
  ctx.builder.set_insertion_point(outer_block, outer_pos);
  for (Entry *e : untouched)
    if (ctx.handles.count(e->id)) TileAccess::restore(*e->handle, e->outer);
  for (size_t i = 0; i < carried.size(); ++i)
    if (ctx.handles.count(carried[i]->id)) TileAccess::set_value(*carried[i]->handle, loop->result(int(i)));
}

void if_(const Tile &cond, const std::function<void()> &then_fn, const std::function<void()> &else_fn, SrcLoc loc) {
  auto &ctx = TraceContext::require("if_", loc);
  dsl::require_valid(cond, "if_", "the condition", loc);
  bool ok = TileAccess::is_bool_literal(cond) ||
            (!cond.is_literal() && !cond.is_ptr() && cond.rank() == 0 && cond.dtype() == DType::i1);
  if (!ok) dsl::fail(loc, fmt::format("if_: the condition must be an i1 scalar, got {}", dsl::describe(cond)));
  ir::Value *c = dsl::materialize(ctx, cond, DType::i1, {}, "if_", loc);

  ir::Op *op = ctx.builder.create(ir::OpKind::If, {c}, {}, {}, dsl::ir_loc(loc));
  ir::Block *outer_block = ctx.builder.block();
  size_t outer_pos = ctx.builder.position();
  std::vector<Entry> entries = snapshot(ctx);

  // Trace a branch from the outer contents; return what each handle holds at its end, then restore.
  auto trace_branch = [&](ir::Block *b, const std::function<void()> &fn) {
    ctx.builder.set_insertion_point_to_end(b);
    if (fn) fn();
    std::vector<State> states;
    for (auto &e : entries) {
      std::optional<State> now = current_state(ctx, e);
      states.push_back(now ? *now : e.outer);
      if (now) TileAccess::restore(*e.handle, e.outer);
    }
    return states;
  };
  std::vector<State> then_states = trace_branch(op->region(0), then_fn);
  std::vector<State> else_states = trace_branch(op->region(1), else_fn);

  std::vector<ir::Value *> then_yields, else_yields;
  std::vector<Entry *> changed;
  std::vector<ir::Type> types;
  for (size_t i = 0; i < entries.size(); ++i) {
    const State &t = then_states[i], &e = else_states[i], &o = entries[i].outer;
    if (t == o && e == o) continue;
    const ir::Value *tv = TileAccess::state_is_value(t) ? t.value : nullptr;
    const ir::Value *ev = TileAccess::state_is_value(e) ? e.value : nullptr;
    if (tv && ev && tv->type != ev->type)
      dsl::fail(loc, fmt::format("if_: a variable gets different types in the two branches: {} in then, {} in else",
                                 dsl::describe(tv->type), dsl::describe(ev->type)));
    if (!tv && !ev)
      dsl::fail(loc, fmt::format("if_: a variable holds non-tile values after the branches ({} in then, {} in else); "
                                 "initialise it with full() before if_",
                                 describe_state(t), describe_state(e)));
    ir::Type type = tv ? tv->type : ev->type;
    for (const State *s : {&t, &e})
      if (TileAccess::state_is_empty(*s))
        dsl::fail(loc, fmt::format("if_: a variable of type {} has a value in only one branch and none before "
                                   "if_; give it a value before the branch",
                                   dsl::describe(type)));
    changed.push_back(&entries[i]);
    types.push_back(type);
  }
  // Yield in each branch (literals become constants of the other branch's type inside that branch).
  auto yield_branch = [&](ir::Block *b, const std::vector<State> &states) {
    ctx.builder.set_insertion_point_to_end(b);
    std::vector<ir::Value *> ys;
    for (size_t k = 0; k < changed.size(); ++k) {
      const State &s = states[size_t(changed[k] - entries.data())];
      ys.push_back(TileAccess::state_is_value(s)
                       ? s.value
                       : dsl::materialize(ctx, TileAccess::from_state(s), types[k].dtype(), types[k].shape, "if_", loc));
    }
    ctx.builder.create(ir::OpKind::Yield, ys, {}, {}, dsl::ir_loc(loc));
  };
  yield_branch(op->region(0), then_states);
  yield_branch(op->region(1), else_states);

  for (auto &t : types) op->add_result(t);
  ctx.builder.set_insertion_point(outer_block, outer_pos);
  for (size_t k = 0; k < changed.size(); ++k)
    if (ctx.handles.count(changed[k]->id)) TileAccess::set_value(*changed[k]->handle, op->result(int(k)));
}

}  // namespace tilejit
