// The interpreter's pre-decoded form of a Function: every Value gets a dense slot number once, and every
// op becomes an Instr holding its operand/result slots, so execution does no map lookups.
#pragma once
#include <memory>
#include <vector>

#include "ir/ir.h"

namespace tilejit::interp {

struct Body;

struct Instr {
  const ir::Op *op = nullptr;
  ir::OpKind kind{};
  std::vector<int> in;   // operand slots
  std::vector<int> out;  // result slots
  std::vector<std::unique_ptr<Body>> regions;
};

/// A block: its argument slots, its ops (the terminating Yield removed) and the slots it yields.
struct Body {
  std::vector<int> args;
  std::vector<Instr> instrs;
  std::vector<int> yields;
};

struct Program {
  Body body;                                // the function body; args = parameters
  std::vector<const ir::Type *> slot_types; // indexed by slot
};

/// Builds the slot numbering and instruction lists. Throws InterpError if an operand is used before it
/// is defined (an IR bug the verifier should have caught).
Program compile(const ir::Function &fn);

}  // namespace tilejit::interp
