#include "runtime/env.h"

#include <cstdlib>

namespace tilejit::runtime {

std::string env_string(const char *name) {
  const char *value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

bool env_flag(const char *name) {
  std::string value = env_string(name);
  return !value.empty() && value != "0";
}

bool debug_enabled() { return env_flag("TILEJIT_DEBUG"); }

}  // namespace tilejit::runtime
