// The stage files TILEJIT_DUMP_STAGES writes while the built-in kernels are rendered to PTX, for tests that read
// stages back (ir::parse, the layouts read by codegen).
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "test_runtime_scoped_env.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/kernels.h"
#include "tilejit/ops.h"
#include "tilejit/paged_attention.h"

namespace tilejit::testing {

/// Every .tir and .ptx stage file written while these kernels are rendered to PTX: the forward with a user's
/// ALiBi and a causal mask, paged decode, the backward's three kernels with a soft-cap lambda, matmul, softmax; by
/// kernel directory, then file name. A kernel this process traced before writes only its codegen stages.
inline std::map<std::string, std::map<std::string, std::string>> dumped_stages() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("tilejit-stages-{}", ::getpid());
  fs::remove_all(dir);
  {
    ScopedEnv dump("TILEJIT_DUMP_STAGES", dir.string());
    attention::FlexShape s{.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 300, .seqlen_k = 300, .head_dim_qk = 64};
    attention::FlexOptions o;
    Captured slopes = capture(DevicePtr{256, 16}, DType::f32);
    o.score_mod = attention::ScoreMod([slopes](Tile score, Tile, Tile h, Tile q, Tile kv) {
      return score - load(slopes() + h) * abs(q - kv).to(DType::f32);
    });
    o.mask = attention::causal_top_left();
    attention::flex_forward_ptx(s, o);
    attention::FlexOptions b;
    b.score_mod = attention::softcap(30.f);
    attention::flex_backward_ptx(s, b);
    attention::PagedKVCache c;
    c.k_pages = c.v_pages = DevicePtr{256, 0};
    c.block_table = c.seq_lens = DevicePtr{256, 0};
    c.num_pages = 100;
    c.page_size = 16;
    c.heads_kv = 2;
    c.head_dim = 64;
    c.max_pages_per_seq = 32;
    attention::FlexShape d{.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 4, .seqlen_k = 500, .head_dim_qk = 64};
    attention::FlexOptions p;
    p.kv_cache = &c;
    p.mask = attention::causal_bottom_right();
    attention::flex_forward_ptx(d, p);
    for (const char *k : {"matmul", "softmax"}) kernels::builtin_ptx(k, kernels::BuiltinSpec{});
  }
  std::map<std::string, std::map<std::string, std::string>> files;
  for (const auto &kernel : fs::directory_iterator(dir))
    for (const auto &f : fs::directory_iterator(kernel.path()))
      if (f.path().extension() == ".tir" || f.path().extension() == ".ptx") {
        std::ifstream in(f.path(), std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        files[kernel.path().filename()][f.path().filename()] = text.str();
      }
  fs::remove_all(dir);
  return files;
}

}  // namespace tilejit::testing
