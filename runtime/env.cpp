#include "runtime/env.h"

#include <charconv>
#include <cstdlib>

#include "tilejit/error.h"

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

std::optional<int64_t> env_int(const char *name) {
  std::string value = env_string(name);
  if (value.empty()) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    throw Error(fmt::format("{}='{}' is not an integer", name, value));
  return v;
}

}  // namespace tilejit::runtime
