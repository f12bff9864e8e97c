#include "tools/backend_flag.h"

#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/launch.h"

namespace tilejit::tools {

Backend parse_backend(const std::string &s) {
  if (s == "gpu") return Backend::GPU;
  if (s == "interp") return Backend::Interpreter;
  if (s == "auto")
    return resolve_backend(Backend::Auto) == Backend::Interpreter || !gpu_available() ? Backend::Interpreter
                                                                                       : Backend::GPU;
  throw Error("unknown backend '" + s + "' (gpu, interp or auto)");
}

}  // namespace tilejit::tools
