// Flex attention's autotuner on the GPU (ctest label `gpu`): results stay correct per mod (float64
// reference), tuning restores the outputs it overwrote, and winners land in the disk cache, one per key.
#include <filesystem>

#include <fmt/format.h>
#include <unistd.h>

#include "flex_checks.h"
#include "kernels/flex/flex_internal.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/autotune.h"

using namespace tilejit;
using namespace tilejit::testing;
namespace fs = std::filesystem;

namespace {

size_t autotune_entries(const std::string &dir) {
  size_t n = 0;
  for (const auto &e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind("autotune-", 0) == 0;
  return n;
}

}  // namespace

TEST_CASE("autotuning flex: correct per mod, outputs restored, one disk entry per key", "[gpu][autotune][flex]") {
  std::string dir = (fs::temp_directory_path() / fmt::format("tilejit-flex-tune-{}", ::getpid())).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  ScopedEnv env("TILEJIT_CACHE_DIR", dir);
  autotune::clear_memory_cache();

  FlexCase c;
  c.shape = {.batch = 2, .heads_q = 4, .seqlen_q = 333, .seqlen_k = 333, .head_dim_qk = 64};
  c.dtype = DType::bf16;
  const int S = c.shape.seqlen_q;
  std::vector<int> docs(size_t(c.shape.batch) * S);
  for (int b = 0; b < c.shape.batch; ++b)
    for (int i = 0; i < S; ++i) docs[size_t(b) * S + i] = (i + 7 * b) / 90;
  Buffer doc_ids(docs.size() * 4, Backend::GPU);
  doc_ids.upload(docs);

  attention::FlexOptions none, window, document;
  window.mask = attention::sliding_window(40, 0);
  document.mask = attention::document_mask(capture(doc_ids, DType::i32));
  window.score_mod = attention::softcap(0.5f);
  RefMods window_ref{[](double s, int, int, int, int) { return 0.5 * std::tanh(s / 0.5); },
                     [](int, int, int q, int kv, int sq, int sk) {
                       return ref_band({40, 0, attention::Align::TopLeft}, q, kv, sq, sk);
                     }};
  RefMods doc_ref{{}, [&](int b, int, int q, int kv, int, int) { return docs[size_t(b) * S + q] == docs[size_t(b) * S + kv]; }};
  int i = 0;
  for (auto [name, opt, ref] : {std::tuple{"none", none, RefMods{}}, std::tuple{"softcap + window", window, window_ref},
                                std::tuple{"document", document, doc_ref}}) {
    INFO("autotuned flex, " << name);
    opt.autotune = true;
    require_matches(run_flex_case(Backend::GPU, c, opt, ref), c.dtype);
    CHECK(autotune_entries(dir) == size_t(++i));  // a new key per mod (the mods' IR is in the key)
  }

  // Tuning directly: the poison in out / lse must be back afterwards, and the config is a candidate.
  autotune::clear_memory_cache();
  size_t n = size_t(c.shape.batch) * c.shape.heads_q * S * 64;
  Buffer q(n * 2, Backend::GPU), k(n * 2, Backend::GPU), v(n * 2, Backend::GPU), out(n * 2, Backend::GPU),
      lse(n / 64 * 4, Backend::GPU);
  for (Buffer *b : {&q, &k, &v}) b->fill_bytes(0x3c);
  out.fill_bytes(0xab);
  lse.fill_bytes(0xcd);
  auto dp = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  attention::FlexOptions o = window;
  o.autotune = true;
  o.backend = Backend::GPU;
  attention::FlexOptions t = attention::flex::tuned_flex_options(dp(q), dp(k), dp(v), dp(out), dp(lse), c.shape, o);
  CHECK_FALSE(t.autotune);
  CHECK((t.block_m == 64 || t.block_m == 128));
  CHECK((t.block_n == 32 || t.block_n == 64 || t.block_n == 128));
  CHECK((t.num_warps == 4 || t.num_warps == 8));
  CHECK((t.num_stages == 2 || t.num_stages == 3));
  size_t changed = 0;
  for (auto b : out.download_as<uint8_t>(n * 2)) changed += b != 0xab;
  for (auto b : lse.download_as<uint8_t>(n / 64 * 4)) changed += b != 0xcd;
  CHECK(changed == 0);
  fs::remove_all(dir);
}
