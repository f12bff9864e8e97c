// GPU tests (ctest label `gpu`): every built-in kernel compiled through LLVM NVPTX and run on the device,
// against float64 references on fresh random inputs with poisoned outputs. Run on a GPU machine with
// `ctest --test-dir build -L gpu --output-on-failure`.
#include "kernel_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("a GPU is present", "[gpu]") { REQUIRE(gpu_available()); }

TEST_CASE("vector_add on the GPU", "[gpu]") {
  check_vector_add(Backend::GPU, 1 << 20);
  check_vector_add(Backend::GPU, 1000003, 8);
  check_vector_add(Backend::GPU, 17, 1);
}

TEST_CASE("softmax on the GPU", "[gpu]") {
  for (int cols : {1, 100, 1024, 1000, 4096})
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) check_softmax(Backend::GPU, 37, cols, dt);
}

TEST_CASE("matmul on the GPU", "[gpu]") {
  check_matmul(Backend::GPU, 256, 256, 256, DType::f32);
  check_matmul(Backend::GPU, 512, 384, 256, DType::bf16);
  check_matmul(Backend::GPU, 300, 200, 100, DType::f16);
  check_matmul(Backend::GPU, 129, 65, 47, DType::bf16, {32, 32, 16});
}

TEST_CASE("attention forward on the GPU", "[gpu][attention]") {
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      check_attention(Backend::GPU, {2, 3, 256, 256, d}, causal, DType::bf16);
      check_attention(Backend::GPU, {1, 2, 1000, 1000, d}, causal, DType::f16);
      check_attention(Backend::GPU, {1, 1, 17, 17, d}, causal, DType::bf16);
    }
  check_attention(Backend::GPU, {1, 2, 100, 333, 64}, false, DType::bf16);
  check_attention(Backend::GPU, {1, 2, 512, 512, 32}, true, DType::bf16, 64, 32);
}

TEST_CASE("attention forward on the GPU with a huge softmax scale", "[gpu][attention]") {
  // Within the bounded frame (|max q·k·scale·log2e| < 2^28, f16's bound, for these inputs).
  for (float scale : {1e4f, 1e5f}) {
    INFO("softmax_scale " << scale);
    check_attention(Backend::GPU, {2, 3, 256, 300, 64}, false, DType::bf16, 64, 64, 1 << 30, scale, true);
    check_attention(Backend::GPU, {1, 2, 500, 500, 128}, true, DType::f16, 128, 64, 1 << 30, scale, true);
  }
}

TEST_CASE("GPU attention matches the interpreter", "[gpu][attention]") {
  attention::Shape s{1, 2, 130, 130, 64};
  size_t nq = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim, nl = size_t(s.heads) * s.seqlen_q;
  auto q = random_values(nq, DType::bf16), k = random_values(nq, DType::bf16), v = random_values(nq, DType::bf16);
  std::vector<float> outs[2];
  int i = 0;
  for (Backend be : {Backend::GPU, Backend::Interpreter}) {
    auto bq = upload_as(q, DType::bf16, be), bk = upload_as(k, DType::bf16, be), bv = upload_as(v, DType::bf16, be);
    Buffer out(nq * 2, be), lse(nl * 4, be);
    out.fill_bytes(0xff);
    attention::Options opt;
    opt.causal = true;
    opt.backend = be;
    attention::forward(bq, bk, bv, out, lse, s, opt);
    outs[i++] = download_as_float(out, nq, DType::bf16);
  }
  std::vector<double> ref(outs[1].begin(), outs[1].end());
  double err = rel_error(outs[0], ref);
  INFO("GPU vs interpreter rel error " << err);
  REQUIRE(err <= 1e-2);  // both round p to bf16 before P·V; exp2 differs (ex2.approx vs libm)
}
