// Creates ops at an insertion point. The builder does no semantic checks (dsl/semantic does those, and
// ir/verifier re-checks invariants); it only wires operands, results and parents.
#pragma once
#include "ir/ir.h"

namespace tilejit::ir {

class Builder {
 public:
  explicit Builder(Block *block) : block_(block), pos_(block->ops.size()) {}

  /// Appends (or inserts at the current position) an op with the given operands and result types.
  Op *create(OpKind kind, std::vector<Value *> operands, std::vector<Type> result_types,
             Attrs attrs = {}, SourceLoc loc = {});
  /// Convenience for ops with one result.
  Value *create1(OpKind kind, std::vector<Value *> operands, Type result_type, Attrs attrs = {},
                 SourceLoc loc = {}) {
    return create(kind, std::move(operands), {std::move(result_type)}, std::move(attrs), loc)->result();
  }

  Block *block() const { return block_; }
  size_t position() const { return pos_; }
  void set_insertion_point(Block *b, size_t pos) { block_ = b; pos_ = pos; }
  void set_insertion_point_to_end(Block *b) { block_ = b; pos_ = b->ops.size(); }

 private:
  Block *block_;
  size_t pos_;
};

}  // namespace tilejit::ir
