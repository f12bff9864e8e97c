// Execution state of one interp::run call, and the op-family entry points that operate on it.
#pragma once
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "interp/program.h"
#include "interp/tile.h"
#include "tilejit/launch.h"

namespace tilejit::interp {

/// The byte range of one bounds-checked pointer argument.
struct ArgRange {
  uint64_t lo = 0, bytes = 0;
  int arg = 0;                  // index in the argument list
  const char *name = nullptr;   // the kernel parameter's name (the Function outlives the run)

  /// "argument 3 ('K')", for error messages.
  std::string label() const {
    return name && *name ? fmt::format("argument {} ('{}')", arg, name) : fmt::format("argument {}", arg);
  }
};

struct Frame {
  const Program *prog = nullptr;
  std::vector<Tile> slots;          // one per slot of the program
  std::vector<ArgRange> args;       // indexed by argument; lo/bytes of pointer arguments (else 0/0)
  std::vector<ArgRange> ranges;     // non-null pointer arguments with bytes > 0 (for pointers without provenance)
  bool has_unchecked_ptr = false;   // some non-null pointer argument has bytes == 0
  Grid grid;
  std::array<uint32_t, 3> pid{};

  const ir::Type &type(int slot) const { return *prog->slot_types[size_t(slot)]; }
  Tile &at(int slot) { return slots[size_t(slot)]; }

  /// Throws InterpError: "<op> at <file:line>: <what>, program_id (x, y, z)".
  [[noreturn]] void fail(const Instr &in, const std::string &what) const;
};

/// "[3, 17]": the multi-index of flat element k in a row-major tile of `shape` ("[]" for a scalar).
std::string element_index_str(const std::vector<int64_t> &shape, int64_t k);

// Op families (one file each). Each reads its operands' slots and writes its result slots.
void exec_elementwise(Frame &fr, const Instr &in);  // arithmetic, math, compare, select, cast, ptr_add
void exec_shape(Frame &fr, const Instr &in);        // constant, program ids, arange, splat, broadcast, ...
void exec_memory(Frame &fr, const Instr &in);       // load, store, atomic_add
void exec_reduce(Frame &fr, const Instr &in);       // reduce, arg_reduce
void exec_dot(Frame &fr, const Instr &in);          // dot

}  // namespace tilejit::interp
