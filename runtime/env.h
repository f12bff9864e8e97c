// The environment variables tilejit reads, all registered in runtime/env.def (one list, also documented in
// README's table). Values are read on each call (cheap), so tests can change them with setenv. Tests also read
// TILEJIT_PTXAS and TILEJIT_PTX_DUMP_DIR, which the library never does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace tilejit::runtime {

/// One registered variable (runtime/env.def).
enum class Env {
#define TILEJIT_ENV(id, name, affects, doc) id,
#include "runtime/env.def"
#undef TILEJIT_ENV
};

/// The variable's name, e.g. "TILEJIT_DEBUG".
const char *env_name(Env var);
/// The variable's value, or "" when unset.
std::string env_string(Env var);
/// True when the variable is set to a non-empty value other than "0".
bool env_flag(Env var);
/// The variable as an integer, nullopt when unset or empty; throws Error naming it when it is not an integer
/// (all of it: "1abc" is rejected).
std::optional<int64_t> env_int(Env var);
/// "NAME=value;" for every registered variable that changes generated code and is set (values other than
/// "0" as 1): part of the compile-cache key.
std::string env_code_key();
/// The same for the variables that change generated code or what the autotuner tries: part of its keys.
std::string env_tuning_key();

/// A variable of the system's, not tilejit's (HOME, XDG_CACHE_HOME): its value, or "" when unset.
std::string system_env(const char *name);
/// TILEJIT_DEBUG is on.
bool debug_enabled();

/// Prints "tilejit: <message>" to stderr when TILEJIT_DEBUG is on.
template <class... Args> void debug_log(fmt::format_string<Args...> format, Args &&...args) {
  if (debug_enabled()) {
    fmt::print(stderr, "tilejit: {}\n", fmt::format(format, std::forward<Args>(args)...));
  }
}

}  // namespace tilejit::runtime
