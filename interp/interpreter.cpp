// interp::run: binds arguments, then executes the pre-decoded body for every program id; control flow
// (for, if) lives here, every other op is dispatched to its family (ops_*.cpp).
#include "interp/interpreter.h"

#include <fmt/format.h>

#include "interp/frame.h"
#include "interp/numerics.h"
#include "tilejit/error.h"

namespace tilejit::interp {

void Frame::fail(const Instr &in, const std::string &what) const {
  throw InterpError(fmt::format("{} at {}: {}, program_id ({}, {}, {})", ir::op_name(in.kind),
                                in.op->loc.str(), what, pid[0], pid[1], pid[2]));
}

std::string element_index_str(const std::vector<int64_t> &shape, int64_t k) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

namespace {

void exec_body(Frame &fr, const Body &b);

/// Reads the scalar integer in `slot` (lb/ub/step/iv/cond).
int64_t scalar_int(Frame &fr, int slot) { return fr.at(slot).i.at(0); }

/// Copies the values yielded by `b` into `dst` slots, through temporaries: a yield may name one of the
/// destination slots (loop-carried values that swap places).
void copy_yields(Frame &fr, const Body &b, const int *dst, std::vector<Tile> &tmp) {
  tmp.resize(b.yields.size());
  for (size_t j = 0; j < b.yields.size(); ++j) tmp[j] = fr.at(b.yields[j]);
  for (size_t j = 0; j < b.yields.size(); ++j) std::swap(fr.at(dst[j]), tmp[j]);
}

void exec_for(Frame &fr, const Instr &in) {
  const Body &body = *in.regions[0];
  const int64_t lb = scalar_int(fr, in.in[0]), ub = scalar_int(fr, in.in[1]), step = scalar_int(fr, in.in[2]);
  if (step <= 0) fr.fail(in, fmt::format("the loop step is {} but must be positive (bounds {} to {})", step, lb, ub));
  const size_t ncarried = in.in.size() - 3;
  if (body.args.size() != ncarried + 1 || body.yields.size() != ncarried || in.out.size() != ncarried)
    fr.fail(in, fmt::format("{} carried values but the body has {} arguments and yields {} values (invalid IR)",
                            ncarried, body.args.size(), body.yields.size()));
  for (size_t j = 0; j < ncarried; ++j) fr.at(body.args[j + 1]) = fr.at(in.in[j + 3]);
  const DType iv_type = fr.type(body.args[0]).dtype();
  std::vector<Tile> tmp;
  for (int64_t iv = lb; iv < ub;) {
    fr.at(body.args[0]).i.assign(1, wrap_int(iv, iv_type));
    exec_body(fr, body);
    copy_yields(fr, body, body.args.data() + 1, tmp);
    if (__builtin_add_overflow(iv, step, &iv)) break;  // the next iv would pass ub anyway
  }
  // With zero trips the results are the initial values, already copied into the args.
  for (size_t j = 0; j < ncarried; ++j) fr.at(in.out[j]) = fr.at(body.args[j + 1]);
}

void exec_if(Frame &fr, const Instr &in) {
  const Body &chosen = *in.regions[scalar_int(fr, in.in[0]) ? 0 : 1];
  exec_body(fr, chosen);
  if (chosen.yields.size() != in.out.size())
    fr.fail(in, fmt::format("the branch yields {} values but the if has {} results (invalid IR)",
                            chosen.yields.size(), in.out.size()));
  std::vector<Tile> tmp;
  copy_yields(fr, chosen, in.out.data(), tmp);
}

void exec_instr(Frame &fr, const Instr &in) {
  using K = ir::OpKind;
  switch (in.kind) {
    case K::Constant: case K::ProgramId: case K::NumPrograms: case K::Arange: case K::Splat:
    case K::Broadcast: case K::ExpandDims: case K::Reshape: case K::Trans:
      return exec_shape(fr, in);
    case K::Load: case K::Store: case K::AtomicAdd:
      return exec_memory(fr, in);
    case K::Reduce: case K::ArgReduce:
      return exec_reduce(fr, in);
    case K::Dot:
      return exec_dot(fr, in);
    case K::For:
      return exec_for(fr, in);
    case K::If:
      return exec_if(fr, in);
    case K::Yield:
      return;  // removed by compile()
    default:
      return exec_elementwise(fr, in);
  }
}

void exec_body(Frame &fr, const Body &b) {
  for (const Instr &in : b.instrs) exec_instr(fr, in);
}

/// Stores kernel argument `i` into the parameter's slot, checking that its kind fits the parameter type.
void bind_arg(Frame &fr, const ir::Function &fn, size_t i, const KernelArg &a) {
  const ir::Type &t = fn.param(int(i))->type;
  Tile &tile = fr.at(fr.prog->body.args[i]);
  const std::string &name = fn.params[i].name;
  auto mismatch = [&](const char *kind) {
    throw InterpError(fmt::format("kernel '{}': argument {} is a {} but parameter '{}' has type {}", fn.name, i,
                                  kind, name, t.str()));
  };
  switch (a.kind) {
    case KernelArg::Kind::Ptr:
      if (!t.is_ptr()) mismatch("pointer");
      tile.i.assign(1, int64_t(a.ptr));
      tile.prov.assign(1, int32_t(i));
      fr.args[i] = {a.ptr, uint64_t(a.bytes), int(i), name.c_str()};
      if (a.ptr == 0) return;  // never a valid target, even with bytes > 0
      if (a.bytes > 0) fr.ranges.push_back(fr.args[i]);
      else fr.has_unchecked_ptr = true;
      return;
    case KernelArg::Kind::Int:
      if (t.is_ptr() || !is_int(t.dtype())) mismatch("integer");
      tile.i.assign(1, wrap_int(a.i, t.dtype()));
      return;
    case KernelArg::Kind::Float:
      if (t.is_ptr() || !is_float(t.dtype())) mismatch("float");
      tile.f.assign(1, round_float(a.f, t.dtype()));
      return;
  }
}

}  // namespace

void run(const ir::Function &fn, Grid grid, const std::vector<KernelArg> &args) {
  if (args.size() != fn.params.size() || fn.body->args.size() != fn.params.size())
    throw InterpError(fmt::format("kernel '{}' takes {} arguments but {} were given", fn.name, fn.params.size(),
                                  args.size()));
  const Program prog = compile(fn);
  Frame fr;
  fr.prog = &prog;
  fr.slots.resize(prog.slot_types.size());
  fr.grid = grid;
  fr.args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) bind_arg(fr, fn, i, args[i]);
  for (uint32_t z = 0; z < grid.z; ++z)
    for (uint32_t y = 0; y < grid.y; ++y)
      for (uint32_t x = 0; x < grid.x; ++x) {
        fr.pid = {x, y, z};
        exec_body(fr, prog.body);
      }
}

}  // namespace tilejit::interp
