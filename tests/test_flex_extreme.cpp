// Flex attention on the CPU interpreter with scores of huge magnitude (soft masks such as −1e10 or −FLT_MAX,
// positive ones, ALiBi with huge slopes, a huge softmax scale) against the float64 softmax (flex_checks.h).
#include "flex_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("flex: score_mods returning huge finite scores match the float64 softmax", "[flex]") {
  check_flex_extreme_scores(Backend::Interpreter, DType::bf16, 16, 16, 37, 70);
  check_flex_extreme_scores(Backend::Interpreter, DType::f16, 16, 32, 37, 70);
}

TEST_CASE("flex: a row's max crossing between the softmax's frames drops the earlier blocks", "[flex]") {
  check_flex_frame_switch(Backend::Interpreter, DType::f16, 16, 16);
  check_flex_frame_switch(Backend::Interpreter, DType::bf16, 16, 32);
}

TEST_CASE("flex: a softmax scale whose log2(e) multiple overflows f32 is rejected", "[flex]") {
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 1, .seqlen_q = 8, .seqlen_k = 8, .head_dim_qk = 16};
  c.softmax_scale = 3e38f;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, {}, {}),
                      Catch::Contains("softmax_scale 3e+38 is too large") && Catch::Contains("2.35"));
}
