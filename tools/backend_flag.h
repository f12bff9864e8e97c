// The --backend flag every tilejit command takes.
#pragma once
#include <string>

#include "tilejit/launch.h"

namespace tilejit::tools {

/// "gpu", "interp" (the CPU interpreter) or "auto": the GPU when a driver and device are present, else the
/// interpreter (TILEJIT_INTERPRET=1 picks the interpreter without probing for a driver, as Backend::Auto does).
/// Throws Error for anything else.
Backend parse_backend(const std::string &s);

}  // namespace tilejit::tools
