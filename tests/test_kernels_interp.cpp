// The built-in kernels, traced by the DSL and run on the CPU interpreter, against float64 references.
#include "kernel_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("vector_add on the interpreter, tail masked", "[kernels][interp]") {
  check_vector_add(Backend::Interpreter, 1000);
  check_vector_add(Backend::Interpreter, 3000);
}

TEST_CASE("softmax on the interpreter", "[kernels][interp]") {
  check_softmax(Backend::Interpreter, 5, 100, DType::f32);
  check_softmax(Backend::Interpreter, 3, 257, DType::bf16);
  check_softmax(Backend::Interpreter, 4, 64, DType::f16);
}

TEST_CASE("matmul on the interpreter", "[kernels][interp]") {
  check_matmul(Backend::Interpreter, 64, 64, 64, DType::f32);
  check_matmul(Backend::Interpreter, 100, 72, 40, DType::bf16);
  check_matmul(Backend::Interpreter, 33, 65, 17, DType::f16, {32, 32, 16});
}

TEST_CASE("attention forward on the interpreter", "[kernels][interp][attention]") {
  check_attention(Backend::Interpreter, {1, 2, 128, 128, 64}, false, DType::bf16);
  check_attention(Backend::Interpreter, {1, 2, 128, 128, 64}, true, DType::bf16);
  check_attention(Backend::Interpreter, {2, 1, 100, 100, 32}, true, DType::f16, 32, 32);
  check_attention(Backend::Interpreter, {1, 1, 77, 45, 128}, false, DType::bf16);
}

TEST_CASE("attention forward on the interpreter with a huge softmax scale", "[kernels][interp][attention]") {
  // Within the bounded frame (|max q·k·scale·log2e| < 2^28): the softmax is nearly one-hot on each row's largest
  // q·k (exact: quarter_values), its ties alike.
  for (float scale : {1e4f, 1e5f}) {
    INFO("softmax_scale " << scale);
    check_attention(Backend::Interpreter, {1, 2, 64, 80, 32}, false, DType::bf16, 32, 32, 1 << 30, scale, true);
    check_attention(Backend::Interpreter, {1, 1, 64, 64, 32}, true, DType::f16, 32, 16, 1 << 30, scale, true);
  }
  attention::Options opt;
  opt.softmax_scale = 3e38f;
  REQUIRE_THROWS_WITH(attention::check_shape({1, 1, 16, 16, 16}, opt),
                      Catch::Contains("softmax_scale 3e+38 is too large") && Catch::Contains("2.35"));
}
