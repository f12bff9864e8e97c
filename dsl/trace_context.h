// The state of one kernel trace: the function being built, the builder's insertion point, and the
// registry of live Tile handles (so for_range / if_ can find the handles a body reassigns).
#pragma once
#include <cstdint>
#include <map>
#include <source_location>
#include <vector>

#include "ir/builder.h"
#include "ir/ir.h"
#include "tilejit/capture.h"
#include "tilejit/tile.h"

namespace tilejit::dsl {

class TraceContext {
 public:
  /// Activates a trace of `fn` on this thread (nesting restores the previous one on destruction).
  /// `params[i]` is the body argument of kernel parameter i (null for constexpr parameters); `constants[i]`
  /// the value of constexpr parameter i as a weak literal (empty for runtime parameters; may be shorter).
  TraceContext(ir::Function &fn, std::vector<ir::Value *> params, std::vector<Tile> constants = {});
  ~TraceContext();
  TraceContext(const TraceContext &) = delete;
  TraceContext &operator=(const TraceContext &) = delete;

  /// The active trace of this thread, or null.
  static TraceContext *current();
  /// The active trace; throws TraceError naming `op` when called outside a kernel trace.
  static TraceContext &require(const char *op, const std::source_location &loc);

  ir::Function &fn;
  ir::Builder builder;
  const uint32_t generation;               // distinguishes handles of this trace from stale ones
  std::vector<ir::Value *> params;
  std::vector<Tile> constants;
  std::map<uint64_t, Tile *> handles;      // live handles by registration id (id order = creation order)
  uint64_t next_handle_id = 1;

  /// Captured values used by this trace, in order of first use; each is an extra kernel parameter
  /// appended after the declared ones (see tilejit/capture.h; implemented in dsl/capture.cpp).
  struct CapturedParam {
    std::shared_ptr<detail::CaptureState> state;
    ir::Value *value;
  };
  std::vector<CapturedParam> captures;
  /// The parameter standing for `state` (appended to fn's parameters on first use).
  ir::Value *capture_param(const std::shared_ptr<detail::CaptureState> &state);

 private:
  friend struct TileAccess;
  TraceContext *previous_;
};

/// Privileged access to Tile's internals for the DSL implementation.
struct TileAccess {
  static Tile from_value(ir::Value *v);
  /// The IR value a handle holds (null for literals and empty handles). Throws TraceError when the value
  /// belongs to another trace than the active one (a Tile kept in a static or captured variable).
  static ir::Value *value(const Tile &t) {
    if (t.kind_ != Tile::Kind::Value) return nullptr;
    check_current(t);
    return t.value_;
  }
  static void set_value(Tile &t, ir::Value *v) {
    t.kind_ = Tile::Kind::Value;
    t.value_ = v;
    t.value_gen_ = current_generation();
  }
  static void check_current(const Tile &t);
  static uint32_t current_generation();
  static bool is_int_literal(const Tile &t) { return t.kind_ == Tile::Kind::Int; }
  static bool is_float_literal(const Tile &t) { return t.kind_ == Tile::Kind::Float; }
  static bool is_bool_literal(const Tile &t) { return t.kind_ == Tile::Kind::Bool; }
  static int64_t int_literal(const Tile &t) { return t.ival_; }
  static double float_literal(const Tile &t) { return t.fval_; }
  /// Saved contents of a handle (value or literal), for snapshot/restore around loop and branch bodies.
  struct State {
    Tile::Kind kind;
    ir::Value *value;
    int64_t ival;
    double fval;
    bool operator==(const State &o) const {
      return kind == o.kind && value == o.value && ival == o.ival && fval == o.fval;
    }
  };
  static State state(const Tile &t) { return {t.kind_, t.value_, t.ival_, t.fval_}; }
  static void restore(Tile &t, const State &s) {
    t.kind_ = s.kind;
    t.value_ = s.value;
    t.value_gen_ = current_generation();  // states are taken and restored within one trace
    t.ival_ = s.ival;
    t.fval_ = s.fval;
  }
  static Tile from_state(const State &s) {
    Tile t;
    restore(t, s);
    return t;
  }
  static bool state_is_value(const State &s) { return s.kind == Tile::Kind::Value; }
  static bool state_is_empty(const State &s) { return s.kind == Tile::Kind::Empty; }
  static bool state_is_literal(const State &s) {
    return s.kind == Tile::Kind::Int || s.kind == Tile::Kind::Float || s.kind == Tile::Kind::Bool;
  }
  /// Registration bookkeeping (called by Tile's constructors and destructor).
  static void register_handle(Tile &t);
  static void unregister_handle(Tile &t);
};

}  // namespace tilejit::dsl
