// Backend selection: resolve_backend and gpu_available (include/tilejit/launch.h), auto_backend_note
// (runtime/runtime.h).
#include "runtime/driver.h"
#include "runtime/env.h"
#include "runtime/runtime.h"
#include "tilejit/launch.h"

namespace tilejit {

Backend resolve_backend(Backend b) {
  if (b != Backend::Auto) return b;
  return runtime::env_flag(runtime::Env::Interpret) ? Backend::Interpreter : Backend::GPU;
}

bool gpu_available() {
  try {
    runtime::driver();  // loads once; succeeds only with a device and its context
    return true;
  } catch (...) {
    return false;
  }
}

std::string runtime::auto_backend_note(Backend requested) {
  if (requested != Backend::Auto || resolve_backend(requested) != Backend::GPU) return "";
  return gpu_available() ? " (Backend::Auto means the GPU unless TILEJIT_INTERPRET=1 is set)"
                         : " (Backend::Auto means the GPU unless TILEJIT_INTERPRET=1 is set, and no usable GPU is "
                           "here: pass Backend::Interpreter or set TILEJIT_INTERPRET=1)";
}

}  // namespace tilejit
