// Internal: each built-in kernel renders its IR or PTX for `tilejit ir` / `tilejit ptx`.
#pragma once
#include <string>

#include "tilejit/kernels.h"

namespace tilejit::kernels {
enum class Render { IR, PTX };
std::string vector_add_text(const BuiltinSpec &spec, Render what);
std::string softmax_text(const BuiltinSpec &spec, Render what);
std::string matmul_text(const BuiltinSpec &spec, Render what);
std::string attention_text(const BuiltinSpec &spec, Render what);
LaunchConfig ptx_config(const BuiltinSpec &spec);
}  // namespace tilejit::kernels
