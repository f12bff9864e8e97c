// Backend selection: resolve_backend and gpu_available (include/tilejit/launch.h).
#include "runtime/driver.h"
#include "runtime/env.h"
#include "tilejit/launch.h"

namespace tilejit {

Backend resolve_backend(Backend b) {
  if (b != Backend::Auto) return b;
  return runtime::env_flag("TILEJIT_INTERPRET") ? Backend::Interpreter : Backend::GPU;
}

bool gpu_available() {
  try {
    runtime::driver();  // loads once; succeeds only with a device and its context
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace tilejit
