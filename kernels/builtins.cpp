#include "kernels/builtins.h"

#include "tilejit/attention.h"
#include "tilejit/error.h"

namespace tilejit::kernels {

LaunchConfig ptx_config(const BuiltinSpec &spec) {
  LaunchConfig cfg;
  cfg.num_warps = spec.num_warps;
  cfg.arch = spec.arch;
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
  opt.arch = spec.arch;
  return what == Render::IR ? attention::forward_ir(shape, opt) : attention::forward_ptx(shape, opt);
}

static std::string render(const std::string &name, const BuiltinSpec &spec, Render what) {
  if (name == "vector_add") return vector_add_text(spec, what);
  if (name == "softmax") return softmax_text(spec, what);
  if (name == "matmul") return matmul_text(spec, what);
  if (name == "attention") return attention_text(spec, what);
  throw Error("unknown built-in kernel '" + name + "' (known: vector_add, softmax, matmul, attention)");
}

std::string builtin_ir(const std::string &name, const BuiltinSpec &spec) { return render(name, spec, Render::IR); }
std::string builtin_ptx(const std::string &name, const BuiltinSpec &spec) { return render(name, spec, Render::PTX); }

}  // namespace tilejit::kernels
