// TEMPORARY stub so the library links while the interpreter is written; delete when it lands.
#include "interp/interpreter.h"
#include "tilejit/error.h"
namespace tilejit::interp {
void run(const ir::Function &, Grid, const std::vector<KernelArg> &) { throw Error("interp::run: not implemented yet"); }
}  // namespace tilejit::interp
