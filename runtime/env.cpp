#include "runtime/env.h"

#include <charconv>
#include <cstdlib>

#include "tilejit/error.h"

namespace tilejit::runtime {
namespace {

enum Affects { Nothing, Tuning, Code };
struct EnvEntry {
  const char *name;
  Affects affects;
};
constexpr EnvEntry kEnv[] = {
#define TILEJIT_ENV(id, name, affects, doc) {name, affects},
#include "runtime/env.def"
#undef TILEJIT_ENV
};

// The set variables that affect at least `what`, their values normalized ("0", else "1").
std::string key_of(Affects what) {
  std::string key;
  for (const EnvEntry &e : kEnv)
    if (e.affects >= what)
      if (std::string v = system_env(e.name); !v.empty()) key += fmt::format("{}={};", e.name, v == "0" ? "0" : "1");
  return key;
}

}  // namespace

const char *env_name(Env var) { return kEnv[size_t(var)].name; }

std::string system_env(const char *name) {
  const char *value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string env_string(Env var) { return system_env(env_name(var)); }

bool env_flag(Env var) {
  std::string value = env_string(var);
  return !value.empty() && value != "0";
}

bool debug_enabled() { return env_flag(Env::Debug); }

std::optional<int64_t> env_int(Env var) {
  std::string value = env_string(var);
  if (value.empty()) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    throw Error(fmt::format("{}='{}' is not an integer", env_name(var), value));
  return v;
}

std::string env_code_key() { return key_of(Code); }
std::string env_tuning_key() { return key_of(Tuning); }

}  // namespace tilejit::runtime
