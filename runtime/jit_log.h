// Reading the driver JIT's info log (cuLinkCreate with CU_JIT_INFO_LOG_BUFFER and CU_JIT_LOG_VERBOSE): the
// embedded ptxas reports each function's stack frame and register spills, e.g.
//   ptxas info    : Function properties for attention_fwd
//   ptxas         .     184 bytes stack frame, 180 bytes spill stores, 204 bytes spill loads
//   ptxas info    : Used 128 registers, used 1 barriers, 400 bytes cmem[0]
// and may repeat a function's spills in a warning ("Registers are spilled to local memory in function 'f',
// 180 bytes spill stores, 204 bytes spill loads"). The CUDA driver's JIT (580) writes its own format instead,
//   info    : Function properties for 'axpy':
//   info    : used 12 registers, used 0 barriers, 0 stack, 0 bytes smem, 560 bytes cmem[0], 0 bytes lmem
// whose stack frame plus local memory per thread (stack + lmem) is read as both the stores and the loads:
// tilejit's kernels use them only for spilled registers. The autotuner drops configs that spill before timing them.
#pragma once
#include <string_view>

namespace tilejit::runtime {

/// Register spills of one compiled module, in bytes per thread (ptxas counts the bytes one thread stores to
/// and loads from local memory for spilled registers). -1: the log had no spill report.
struct SpillReport {
  int stores = -1;
  int loads = -1;
  bool known() const { return stores >= 0 && loads >= 0; }
  bool spills() const { return stores > 0 || loads > 0; }
};

/// The spills reported in `info_log`, summed over its functions; a function reported twice (properties and a
/// warning) counts once, with its larger figures. Lines that do not parse are ignored; a log without any
/// "bytes spill stores" or "bytes lmem" line gives {-1, -1}.
SpillReport parse_spill_report(std::string_view info_log);

}  // namespace tilejit::runtime
