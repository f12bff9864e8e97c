// A user's attention variants as C++ lambdas, and tilejit's built-ins of the same math, behind the C ABI of
// user_mods.h. Only tilejit's public headers are used.
//
// Each mod is created once (a ScoreMod or Mask made from a lambda) and kept: tilejit caches traced kernels
// by mod identity, so a new lambda per call would retrace on every call. The values a mod reads (slopes,
// cap, window, ids, prefix, table) are captures — kernel arguments set before each launch — so changing
// them never recompiles.
#include "user_mods.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "tilejit/buffer.h"
#include "tilejit/capture.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"
#include "tilejit/paged_attention.h"

using namespace tilejit;
namespace att = tilejit::attention;

namespace {

thread_local std::string g_error;

/// One mod: its score_mod / mask and the captures it reads.
struct Mod {
  att::ScoreMod score_mod;
  att::Mask mask;
  bool window_band = false;  // builtin:window: a band rebuilt per call from params.window (no function)
  Captured slopes, cap, window, doc_ids, prefix, table;
};

/// The user's lambdas: the math exactly as one would write it in a model.
Mod user_lambda(const std::string &name, int max_distance) {
  Mod m;
  if (name == "alibi") {
    m.slopes = capture(DevicePtr{}, DType::f32);
    auto slopes = m.slopes;
    m.score_mod = [slopes](Tile score, Tile, Tile h, Tile q_idx, Tile kv_idx) {
      return score - load(slopes() + h) * abs(q_idx - kv_idx).to(DType::f32);
    };
  } else if (name == "softcap") {
    m.cap = capture(50.f);
    auto cap = m.cap;
    m.score_mod = [cap](Tile score, Tile, Tile, Tile, Tile) { return cap() * tanh(score / cap()); };
  } else if (name == "window") {
    m.window = capture(int32_t(0));
    auto window = m.window;
    m.mask = [window](Tile, Tile, Tile q_idx, Tile kv_idx) {
      return (kv_idx <= q_idx) & (q_idx - kv_idx <= window());
    };
  } else if (name == "document") {
    m.doc_ids = capture(DevicePtr{}, DType::i32);
    auto ids = m.doc_ids;
    m.mask = [ids](Tile, Tile, Tile q_idx, Tile kv_idx) {
      // [batch, seqlen] ids: mod_q_token / mod_k_token give b·seqlen + index.
      return load(ids() + att::mod_q_token(q_idx)) == load(ids() + att::mod_k_token(kv_idx));
    };
  } else if (name == "prefix_lm") {
    m.prefix = capture(int32_t(0));
    auto prefix = m.prefix;
    m.mask = [prefix](Tile, Tile, Tile q_idx, Tile kv_idx) { return (kv_idx <= q_idx) | (kv_idx < prefix()); };
  } else if (name == "relbias") {
    m.table = capture(DevicePtr{}, DType::f32);
    auto table = m.table;
    const int M = max_distance;
    m.score_mod = [table, M](Tile score, Tile, Tile h, Tile q_idx, Tile kv_idx) {
      Tile rel = minimum(maximum(kv_idx - q_idx, -M), M) + M;
      return score + load(table() + h * (2 * M + 1) + rel);
    };
  } else {
    throw std::invalid_argument("unknown mod '" + name +
                                "' (alibi, softcap, window, document, prefix_lm, relbias, or builtin:<name>)");
  }
  return m;
}

/// tilejit's built-in variants (flex_variants.h) of the same math.
Mod builtin(const std::string &name, int max_distance) {
  Mod m;
  if (name == "alibi") {
    m.slopes = capture(DevicePtr{}, DType::f32);
    m.score_mod = att::alibi(m.slopes);
  } else if (name == "softcap") {
    m.cap = capture(50.f);
    m.score_mod = att::softcap(m.cap);
  } else if (name == "window") {
    m.window_band = true;
  } else if (name == "document") {
    m.doc_ids = capture(DevicePtr{}, DType::i32);
    m.mask = att::document_mask(m.doc_ids);
  } else if (name == "prefix_lm") {
    m.prefix = capture(int32_t(0));
    m.mask = att::prefix_lm(m.prefix);
  } else if (name == "relbias") {
    m.table = capture(DevicePtr{}, DType::f32);
    m.score_mod = att::relative_position_bias(m.table, max_distance);
  } else {
    throw std::invalid_argument("unknown mod 'builtin:" + name +
                                "' (alibi, softcap, window, document, prefix_lm, relbias)");
  }
  return m;
}

/// A block mask built once (user_mods_build_block_mask): for which mod and shape, and the stream its kernel
/// ran on.
struct PrebuiltMask {
  std::string mod;
  att::BlockMask mask;
  att::FlexShape shape;
  void *stream = nullptr;
};

struct State {
  std::map<std::pair<std::string, int>, Mod> mods;  // (mod name, max_distance for relbias, else 0)
  std::map<int, PrebuiltMask> block_masks;           // by handle
  int next_handle = 1;
};

State &state() {
  static State s;
  return s;
}

Mod &mod_for(const std::string &name, const user_mods_params &p) {
  const bool is_builtin = name.rfind("builtin:", 0) == 0;
  const std::string base = is_builtin ? name.substr(8) : name;
  if (base == "relbias" && p.max_distance < 0)
    throw std::invalid_argument("relbias: max_distance " + std::to_string(p.max_distance) + " must be >= 0");
  const int key = base == "relbias" ? p.max_distance : 0;
  auto &mods = state().mods;
  auto it = mods.find({name, key});
  if (it == mods.end())
    it = mods.emplace(std::make_pair(name, key), is_builtin ? builtin(base, key) : user_lambda(base, key)).first;
  return it->second;
}

DevicePtr ptr(const void *p, size_t bytes, const char *what) {
  if (!p) throw std::invalid_argument(std::string("pointer '") + what + "' is null");
  return DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(p)), bytes};
}

/// Sets the mod's captures from params (checked) for `heads` query heads and `tokens` tokens (per-token
/// tables). Captures are shared by every call and plan of the mod, so each launch sets them first.
void set_captures(Mod &m, const user_mods_params &p, int heads, size_t tokens) {
  if (m.slopes.shared_state()) m.slopes.set(ptr(p.alibi_slopes, size_t(heads) * 4, "alibi_slopes"));
  if (m.cap.shared_state()) {
    if (!(p.softcap > 0)) throw std::invalid_argument("softcap: the cap " + std::to_string(p.softcap) + " must be > 0");
    m.cap.set(double(p.softcap));
  }
  if (m.window_band || m.window.shared_state()) {
    if (p.window < 0) throw std::invalid_argument("window: " + std::to_string(p.window) + " must be >= 0");
    if (m.window.shared_state()) m.window.set_int(p.window);
  }
  if (m.doc_ids.shared_state()) m.doc_ids.set(ptr(p.doc_ids, tokens * 4, "doc_ids"));
  if (m.prefix.shared_state()) m.prefix.set_int(p.prefix_len);
  if (m.table.shared_state())
    m.table.set(ptr(p.bias_table, size_t(heads) * (2 * size_t(p.max_distance) + 1) * 4, "bias_table"));
}

/// The mod's mask for these params: builtin:window is a band made from params.window (call after set_captures,
/// which checks it).
att::Mask mask_for(const Mod &m, const user_mods_params &p) {
  return m.window_band ? att::sliding_window(p.window, 0) : m.mask;
}

/// Sets the mod's captures from params (checked) and returns the options for this call.
att::FlexOptions options_for(Mod &m, const user_mods_params &p, const att::FlexShape &s, Backend be) {
  att::FlexOptions opt;
  opt.dtype = DType::bf16;
  opt.backend = be;
  set_captures(m, p, s.heads_q, size_t(s.batch) * s.seqlen_q);
  opt.score_mod = m.score_mod;
  opt.mask = mask_for(m, p);
  return opt;
}

/// The paged cache as tilejit takes it (bf16 only, like every tensor of this library).
att::PagedKVCache paged_cache(const tilejit_paged_kv *c) {
  if (!c) throw std::invalid_argument("cache must not be null");
  if (c->dtype != TILEJIT_DTYPE_BF16)
    throw std::invalid_argument("cache dtype " + std::to_string(c->dtype) + " is not bf16 (" +
                                std::to_string(TILEJIT_DTYPE_BF16) + ")");
  att::PagedKVCache p;
  p.k_pages = ptr(c->k_pages, 0, "k_pages");
  p.v_pages = ptr(c->v_pages, 0, "v_pages");
  p.block_table = ptr(c->block_table, 0, "block_table");
  p.seq_lens = ptr(c->seq_lens, 0, "seq_lens");
  p.dtype = DType::bf16;
  p.num_pages = c->num_pages;
  p.page_size = c->page_size;
  p.heads_kv = c->heads_kv;
  p.head_dim = c->head_dim;
  p.max_pages_per_seq = c->max_pages_per_seq;
  p.page_stride = c->page_stride;
  p.token_stride = c->token_stride;
  p.head_stride = c->head_stride;
  p.block_table_stride = c->block_table_stride;
  return p;
}

att::FlexShape shape_of(int batch, int heads, int seqlen, int head_dim) {
  if (batch < 0 || heads < 0 || seqlen < 0)
    throw std::invalid_argument("batch, heads, seqlen must be >= 0");
  return att::FlexShape{.batch = batch, .heads_q = heads, .heads_kv = heads, .seqlen_q = seqlen, .seqlen_k = seqlen,
                        .head_dim_qk = head_dim};
}

/// Runs f(opt) with the options of a call of mod `name` (its captures set from p) queued on `stream` (a
/// borrowed CUstream on the GPU).
template <class F>
void with_options(const std::string &name, const user_mods_params &p, const att::FlexShape &s, void *stream, F &&f) {
  const Backend be = resolve_backend(Backend::Auto);
  att::FlexOptions opt = options_for(mod_for(name, p), p, s, be);
  std::optional<Stream> borrowed;
  if (be == Backend::GPU) {
    borrowed.emplace(Stream::Borrow{}, stream);
    opt.stream = &*borrowed;
  }
  f(opt);
}

/// With a handle (> 0), the call walks that prebuilt block mask (at its block sizes), which must be of this mod
/// and shape; 0 leaves the mask to the call.
void use_block_mask(int handle, const std::string &name, const att::FlexShape &s, att::FlexOptions &opt) {
  if (handle == 0) return;
  auto pre = state().block_masks.find(handle);
  if (pre == state().block_masks.end())
    throw std::invalid_argument("block mask handle " + std::to_string(handle) + " is unknown (dropped?)");
  const att::FlexShape &b = pre->second.shape;
  if (pre->second.mod != name)
    throw std::invalid_argument("block mask " + std::to_string(handle) + " was built for mod '" + pre->second.mod +
                                "', not '" + name + "'");
  if (b.batch != s.batch || b.heads_q != s.heads_q || b.seqlen_q != s.seqlen_q)
    throw std::invalid_argument("mod '" + name + "': its block mask was built for batch " + std::to_string(b.batch) +
                                ", heads " + std::to_string(b.heads_q) + ", seqlen " + std::to_string(b.seqlen_q) +
                                "; this call has " + std::to_string(s.batch) + ", " + std::to_string(s.heads_q) +
                                ", " + std::to_string(s.seqlen_q));
  opt.block_mask = &pre->second.mask;
  opt.block_m = pre->second.mask.block_m;
  opt.block_n = pre->second.mask.block_n;
}

template <class F>
int guarded(F &&f) {
  try {
    f();
    g_error.clear();
    return 0;
  } catch (const std::exception &e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown exception";
  }
  return 1;
}

}  // namespace

/// A decode plan: the mod (kept in state().mods, never erased), the params its captures are set from before
/// each run, and tilejit's plan.
struct user_mods_decode_plan {
  Mod *mod = nullptr;
  user_mods_params params{};
  int heads_q = 0;
  Backend backend = Backend::GPU;
  void *last_stream = nullptr;  // where the last run was queued (destroy waits for it)
  std::optional<att::DecodePlan> plan;
};

extern "C" {

int user_mods_forward(const char *mod, const user_mods_params *params, int block_mask, const void *q, const void *k,
                      const void *v, void *out, float *lse, int batch, int heads, int seqlen, int head_dim,
                      int autotune, void *stream) {
  return guarded([&] {
    if (!mod || !params) throw std::invalid_argument("mod and params must not be null");
    const std::string name = mod;
    att::FlexShape s = shape_of(batch, heads, seqlen, head_dim);
    with_options(name, *params, s, stream, [&](att::FlexOptions &opt) {
      use_block_mask(block_mask, name, s, opt);
      opt.autotune = autotune != 0;
      const size_t elems = size_t(s.batch) * s.heads_q * s.seqlen_q * size_t(std::max(head_dim, 0));
      att::flex_forward(ptr(q, elems * 2, "q"), ptr(k, elems * 2, "k"), ptr(v, elems * 2, "v"),
                        ptr(out, elems * 2, "out"), ptr(lse, size_t(s.batch) * s.heads_q * s.seqlen_q * 4, "lse"), s,
                        opt);
    });
  });
}

int user_mods_backward(const char *mod, const user_mods_params *params, int block_mask, const void *q, const void *k,
                       const void *v, const void *out, const float *lse, const void *dout, void *dq, void *dk,
                       void *dv, int batch, int heads, int seqlen, int head_dim, void *stream) {
  return guarded([&] {
    if (!mod || !params) throw std::invalid_argument("mod and params must not be null");
    const std::string name = mod;
    att::FlexShape s = shape_of(batch, heads, seqlen, head_dim);
    const size_t elems = size_t(s.batch) * s.heads_q * s.seqlen_q * size_t(std::max(head_dim, 0)), bytes = elems * 2;
    with_options(name, *params, s, stream, [&](att::FlexOptions &opt) {
      use_block_mask(block_mask, name, s, opt);
      att::flex_backward(ptr(q, bytes, "q"), ptr(k, bytes, "k"), ptr(v, bytes, "v"), ptr(out, bytes, "out"),
                         ptr(lse, size_t(s.batch) * s.heads_q * s.seqlen_q * 4, "lse"), ptr(dout, bytes, "dout"),
                         ptr(dq, bytes, "dq"), ptr(dk, bytes, "dk"), ptr(dv, bytes, "dv"), s, opt);
    });
  });
}

int user_mods_build_block_mask(const char *mod, const user_mods_params *params, int batch, int heads, int seqlen,
                               int head_dim, int block_m, int block_n, void *stream, int *handle) {
  return guarded([&] {
    if (!mod || !params || !handle) throw std::invalid_argument("mod, params and handle must not be null");
    const std::string name = mod;
    att::FlexShape s = shape_of(batch, heads, seqlen, head_dim);
    const Backend be = resolve_backend(Backend::Auto);
    Mod &m = mod_for(name, *params);
    if (!m.mask.fn)
      throw std::invalid_argument("mod '" + name + "' has no mask function, so it needs no block mask");
    att::FlexOptions opt = options_for(m, *params, s, be);
    std::optional<Stream> borrowed;
    if (be == Backend::GPU) {
      borrowed.emplace(Stream::Borrow{}, stream);
      opt.stream = &*borrowed;
    }
    opt.block_m = block_m;
    opt.block_n = block_n;
    PrebuiltMask pre{name, att::create_block_mask(opt.mask, s, opt), s, stream};
    *handle = state().next_handle++;
    state().block_masks.emplace(*handle, std::move(pre));
  });
}

int user_mods_drop_block_masks(void) {
  return guarded([] {
    auto &masks = state().block_masks;
    if (resolve_backend(Backend::Auto) == Backend::GPU)
      for (auto &[handle, pre] : masks) Stream(Stream::Borrow{}, pre.stream).synchronize();  // kernels reading them
    masks.clear();
  });
}

int user_mods_decode_plan_create(const char *mod, const user_mods_params *params, const tilejit_paged_kv *cache,
                                 int batch, int heads_q, int seqlen_q, int max_seq_len, int causal,
                                 user_mods_decode_plan **plan) {
  return guarded([&] {
    if (!mod || !params || !plan) throw std::invalid_argument("mod, params and plan must not be null");
    *plan = nullptr;
    const std::string name = mod;
    auto p = std::make_unique<user_mods_decode_plan>();
    p->params = *params;
    p->heads_q = heads_q;
    p->backend = resolve_backend(Backend::Auto);
    static Mod none;  // no score_mod, no mask
    if (name == "none") {
      p->mod = &none;
    } else {
      const std::string base = name.rfind("builtin:", 0) == 0 ? name.substr(8) : name;
      if (base != "alibi" && base != "softcap" && base != "window")
        throw std::invalid_argument("mod '" + name + "' has no decode form here (none, alibi, softcap, window, or "
                                    "builtin:<name> of the last three)");
      p->mod = &mod_for(name, *params);
    }
    att::PagedKVCache c = paged_cache(cache);
    set_captures(*p->mod, p->params, heads_q, 0);
    att::DecodeOptions opt;
    opt.score_mod = p->mod->score_mod;
    opt.mask = mask_for(*p->mod, p->params);
    if (causal && !opt.mask.band && !opt.mask.fn) opt.mask = att::causal(att::Align::BottomRight);
    opt.backend = p->backend;
    p->plan.emplace(att::DecodeShape{.batch = batch, .heads_q = heads_q, .seqlen_q = seqlen_q,
                                     .max_seq_len = max_seq_len},
                    c, opt);
    *plan = p.release();
  });
}

int user_mods_decode_plan_run(user_mods_decode_plan *plan, const void *q, void *out, float *lse,
                              const tilejit_paged_kv *cache, void *stream) {
  return guarded([&] {
    if (!plan) throw std::invalid_argument("plan must not be null");
    att::PagedKVCache c = paged_cache(cache);
    std::optional<Stream> borrowed;
    if (plan->backend == Backend::GPU) borrowed.emplace(Stream::Borrow{}, stream);
    plan->last_stream = stream;
    set_captures(*plan->mod, plan->params, plan->heads_q, 0);
    plan->plan->run(ptr(q, 0, "q"), ptr(out, 0, "out"),
                    lse ? DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(lse)), 0} : DevicePtr{}, c,
                    borrowed ? &*borrowed : nullptr);
  });
}

int user_mods_decode_plan_destroy(user_mods_decode_plan *plan) {
  return guarded([&] {
    if (!plan) return;
    if (plan->backend == Backend::GPU) Stream(Stream::Borrow{}, plan->last_stream).synchronize();  // its scratch
    delete plan;
  });
}

const char *user_mods_last_error(void) { return g_error.c_str(); }

}  // extern "C"
