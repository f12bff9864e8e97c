// TEMPORARY stub so the library links while codegen is written; delete when it lands.
#include "codegen/codegen.h"
#include "tilejit/error.h"
namespace tilejit::codegen {
PtxResult compile_to_ptx(const ir::Function &, const CodegenOptions &) { throw Error("codegen: not implemented yet"); }
std::string emit_llvm_ir(const ir::Function &, const CodegenOptions &) { throw Error("codegen: not implemented yet"); }
std::string llvm_version() { return "19"; }
}  // namespace tilejit::codegen
