#include <fmt/format.h>

#include "kernels/builtins.h"
#include "kernels/launch_options.h"

#include "tilejit/attention.h"
#include "tilejit/error.h"

namespace tilejit::kernels {

LaunchConfig ptx_config(const BuiltinSpec &spec) {
  LaunchConfig cfg;
  cfg.num_warps = spec.num_warps;
  cfg.num_stages = spec.num_stages;
  cfg.min_ctas_per_sm = spec.min_ctas_per_sm;
  cfg.arch = spec.arch;
  cfg.tma = spec.tma;
  cfg.warp_specialize = spec.warp_specialize;
  return cfg;
}

std::string attention_text(const BuiltinSpec &spec, Render what) {
  attention::Shape shape{1, 1, 1024, 1024, spec.head_dim};
  attention::Options opt;
  opt.causal = spec.causal;
  opt.dtype = spec.dtype;
  opt.block_m = spec.block_m;
  opt.block_n = spec.block_n;
  opt.num_warps = spec.num_warps;
  opt.num_stages = spec.num_stages;
  opt.min_ctas_per_sm = spec.min_ctas_per_sm;
  opt.tma = spec.tma;
  opt.warp_specialize = spec.warp_specialize;
  opt.arch = spec.arch;
  return what == Render::IR ? attention::forward_ir(shape, opt) : attention::forward_ptx(shape, opt);
}

// The dtypes each built-in kernel is written for; anything else is an error rather than a silent default.
static void check_spec(const std::string &name, const BuiltinSpec &spec) {
  auto one_of = [&](std::initializer_list<DType> ok) {
    for (DType d : ok)
      if (d == spec.dtype) return;
    throw Error("built-in kernel '" + name + "' has no " + std::string(dtype_name(spec.dtype)) + " version");
  };
  if (name == "vector_add") one_of({DType::f32});
  if (name == "softmax" || name == "matmul") one_of({DType::f32, DType::f16, DType::bf16});
  if (name == "attention") one_of({DType::bf16, DType::f16});
  if (name == "softmax" && (spec.cols < 1 || spec.cols > 16384))
    throw Error("softmax: --cols must be in [1, 16384], got " + std::to_string(spec.cols));
  // num_warps is codegen's to check (it names it before anything looks at the dots); 1 passes here.
  std::string bad = tile_options_error(spec.block_m, spec.block_n, 1, spec.num_stages, false);
  if (bad.empty() && (!pow2_at_least(spec.block_k, 16) || spec.block_k > 256))
    bad = fmt::format("BLOCK_K {} must be a power of two in [16, 256]", spec.block_k);
  if (!bad.empty()) throw Error(fmt::format("{}: {}", name, bad));
  if (spec.block < 16 || spec.block > 65536 || (spec.block & (spec.block - 1)))
    throw Error("vector_add: block must be a power of two in [16, 65536]");
}

bool is_builtin(const std::string &name) {
  return name == "vector_add" || name == "softmax" || name == "matmul" || name == "attention";
}

static std::string render(const std::string &name, const BuiltinSpec &spec, Render what) {
  check_spec(name, spec);
  if (name == "vector_add") return vector_add_text(spec, what);
  if (name == "softmax") return softmax_text(spec, what);
  if (name == "matmul") return matmul_text(spec, what);
  if (name == "attention") return attention_text(spec, what);
  throw Error("unknown built-in kernel '" + name + "' (known: vector_add, softmax, matmul, attention)");
}

std::string builtin_ir(const std::string &name, const BuiltinSpec &spec) { return render(name, spec, Render::IR); }
std::string builtin_ptx(const std::string &name, const BuiltinSpec &spec) { return render(name, spec, Render::PTX); }

}  // namespace tilejit::kernels
