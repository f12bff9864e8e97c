// Checks the user-written mods of user_mods.cpp on the CPU interpreter: each lambda, tilejit's built-in of the
// same math (through this library, and through tilejit's own C ABI where it has the variant), and the masks
// with a block mask built beforehand, all against a float64 reference on fresh random inputs, with outputs
// poisoned before every run. Tolerances: bf16 output, relative Frobenius error ≤ 1e-2 against float64 and
// between the lambda and the built-in; lse (f32) within 1e-3·max(1, |lse|) per row. Then the decode plans
// (user_mods_decode_plan_*, and tilejit's C ABI decode plan with the built-in variant) over a paged cache
// with shuffled pages, the same way. Also the errors.
// Exits non-zero on any failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tilejit/c_api.h"
#include "tilejit/flex_variants.h"
#include "tilejit/numerics.h"
#include "user_mods.h"

namespace {

constexpr int B = 2, H = 2, S = 72, D = 32;  // 72: a partial last block at every block size
constexpr double kOutTol = 1e-2, kLseTol = 1e-3;

int g_failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

struct Inputs {
  std::vector<uint16_t> q, k, v;           // bf16 bits, [B, H, S, D]
  std::vector<double> qf, kf, vf;          // the same values
  std::vector<float> slopes, table;
  std::vector<int32_t> doc_ids;            // [B, S]
  user_mods_params p{};
};

/// Reference mods in float64: score transform and visibility.
struct RefMod {
  std::function<double(double, int, int, int, int)> score;  // (score, b, h, q, kv); empty: identity
  std::function<bool(int, int, int)> visible;               // (b, q, kv); empty: everything
};

struct Result {
  std::vector<double> out, lse;
};

/// One query row's softmax over its scores s (−inf: not visible; mx their largest) applied to the values:
/// out[d] = Σ_j p_j · v(j)[d]; returns the row's logsumexp.
double attend(std::vector<double> &s, double mx, const std::function<const double *(int j)> &v, double *out) {
  double sum = 0;
  for (double &x : s) sum += (x = std::exp(x - mx));
  for (int d = 0; d < D; ++d) {
    double o = 0;
    for (size_t j = 0; j < s.size(); ++j) o += s[j] * v(int(j))[d];
    out[d] = o / sum;
  }
  return mx + std::log(sum);
}

Result reference(const Inputs &in, const RefMod &mod) {
  Result r{std::vector<double>(in.q.size(), 0.0), std::vector<double>(size_t(B) * H * S, 0.0)};
  const double scale = 1.0 / std::sqrt(double(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      size_t base = (size_t(b) * H + h) * S;
      for (int i = 0; i < S; ++i) {
        std::vector<double> s(S, -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          if (mod.visible && !mod.visible(b, i, j)) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += in.qf[(base + i) * D + d] * in.kf[(base + j) * D + d];
          s[size_t(j)] = mod.score ? mod.score(dot * scale, b, h, i, j) : dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        r.lse[base + i] = attend(s, mx, [&](int j) { return &in.vf[(base + j) * D]; }, &r.out[(base + i) * D]);
      }
    }
  return r;
}

double rel_frobenius(const std::vector<double> &got, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

/// Runs `call(out, lse)` on poisoned outputs of `rows` query rows and returns them as doubles.
Result run_rows(size_t rows, const std::function<int(uint16_t *, float *)> &call, const std::string &what,
                const char *(*error)()) {
  std::vector<uint16_t> out(rows * D, 0xffff);
  std::vector<float> lse(rows, std::numeric_limits<float>::quiet_NaN());
  Result r;
  if (call(out.data(), lse.data()) != 0) {
    expect(false, what + ": " + error());
    return r;
  }
  for (uint16_t x : out) r.out.push_back(tilejit::bf16_to_float(x));
  for (float x : lse) r.lse.push_back(x);
  return r;
}

/// The same for the [B, H, S] rows of the prefill checks.
Result run(const std::function<int(uint16_t *, float *)> &call, const std::string &what, const char *(*error)()) {
  return run_rows(size_t(B) * H * S, call, what, error);
}

void compare(const Result &got, const Result &ref, const std::string &what) {
  if (got.out.empty()) return;  // the call failed (already counted)
  double err = rel_frobenius(got.out, ref.out);
  double lse_err = 0;
  for (size_t i = 0; i < ref.lse.size(); ++i)
    lse_err = std::max(lse_err, std::abs(got.lse[i] - ref.lse[i]) / std::max(1.0, std::abs(ref.lse[i])));
  if (!std::isfinite(lse_err)) lse_err = std::numeric_limits<double>::infinity();
  std::printf("  %-44s rel. error %.2e, lse error %.2e\n", what.c_str(), err, lse_err);
  expect(err <= kOutTol, what + ": output relative error " + std::to_string(err));
  expect(lse_err <= kLseTol, what + ": lse error " + std::to_string(lse_err));
}

/// dq, dk, dv (as doubles, [B, H, S, D] each, concatenated) of `mod`'s backward on its own forward's output,
/// with dout = v, the backward walking prebuilt block mask `block_mask` (0: none); empty when a call failed
/// (counted).
std::vector<double> gradients(const Inputs &in, const std::string &mod, int block_mask = 0) {
  const size_t n = in.q.size();
  std::vector<uint16_t> out(n), grads(3 * n, 0xffff);  // poisoned: NaN
  std::vector<float> lse(size_t(B) * H * S);
  if (user_mods_forward(mod.c_str(), &in.p, 0, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), B, H, S,
                        D, 0, nullptr) != 0 ||
      user_mods_backward(mod.c_str(), &in.p, block_mask, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                         in.v.data(), grads.data(), grads.data() + n, grads.data() + 2 * n, B, H, S, D,
                         nullptr) != 0) {
    expect(false, mod + " backward: " + user_mods_last_error());
    return {};
  }
  std::vector<double> g;
  for (uint16_t x : grads) g.push_back(tilejit::bf16_to_float(x));
  return g;
}

int example_forward(const Inputs &in, const std::string &mod, uint16_t *out, float *lse, int block_mask = 0) {
  return user_mods_forward(mod.c_str(), &in.p, block_mask, in.q.data(), in.k.data(), in.v.data(), out, lse, B, H, S,
                           D, 0, nullptr);
}

/// tilejit's C ABI with a built-in variant (set by `set` on an initialized variant).
int c_abi_forward(const Inputs &in, const std::function<void(tilejit_flex_variant &)> &set, uint16_t *out,
                  float *lse) {
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  set(var);
  const int64_t st[4] = {int64_t(H) * S * D, int64_t(S) * D, D, 1};
  return tilejit_flex_attention_forward(in.q.data(), in.k.data(), in.v.data(), out, lse, TILEJIT_DTYPE_BF16, B, H, H,
                                        S, S, D, st, st, st, st, 0.f, &var, nullptr);
}

Inputs make_inputs() {
  Inputs in;
  std::mt19937 rng(20240611);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto tensor = [&](std::vector<uint16_t> &bits, std::vector<double> &values) {
    for (size_t i = 0; i < size_t(B) * H * S * D; ++i) {
      bits.push_back(tilejit::float_to_bf16(2.f * normal(rng)));  // scores of a few units: the mods matter
      values.push_back(tilejit::bf16_to_float(bits.back()));
    }
  };
  tensor(in.q, in.qf);
  tensor(in.k, in.kf);
  tensor(in.v, in.vf);
  in.slopes = tilejit::attention::alibi_slopes(H);  // the slopes tilejit's C ABI uses for H heads
  const int M = 6;
  for (int i = 0; i < H * (2 * M + 1); ++i) in.table.push_back(normal(rng));
  for (int b = 0; b < B; ++b)  // documents of 5..20 tokens, different per batch entry
    for (int i = 0, doc = 0, left = 0; i < S; ++i, --left) {
      if (left == 0) left = 5 + int(rng() % 16), ++doc;
      in.doc_ids.push_back(doc + 100 * b);
    }
  in.p.alibi_slopes = in.slopes.data();
  in.p.softcap = 2.5f;  // scores reach several units: tanh bends them
  in.p.window = 9;
  in.p.doc_ids = in.doc_ids.data();
  in.p.prefix_len = 20;
  in.p.bias_table = in.table.data();
  in.p.max_distance = M;
  return in;
}

// ---- decode over a paged cache ----

constexpr int kDecHq = 4, kDecHkv = 2, kDecPage = 16;
const std::vector<int> kDecLens{37, 70};  // tokens per sequence, the new ones included

/// A paged cache holding random K/V for kDecLens: pages in a shuffled order, every slot no sequence owns NaN.
struct PagedInputs {
  std::vector<uint16_t> k, v;                 // pages [num_pages, page, heads_kv, D] bf16 bits
  std::vector<int32_t> table, lens;           // block table [batch, max_pages], lengths
  std::vector<std::vector<double>> kf, vf;    // per sequence [token, heads_kv, D]
  tilejit_paged_kv kv{};

  PagedInputs(std::mt19937 &rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    const int batch = int(kDecLens.size()), row = kDecHkv * D;
    int max_pages = 0, used = 0;
    for (int L : kDecLens) {
      max_pages = std::max(max_pages, (L + kDecPage - 1) / kDecPage);
      used += (L + kDecPage - 1) / kDecPage;
    }
    const int num_pages = used + 2;
    std::vector<int32_t> order(static_cast<size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    table.assign(size_t(batch) * max_pages, 0);
    k.assign(size_t(num_pages) * kDecPage * row, 0xffff);  // NaN
    v = k;
    for (int b = 0, next = 0; b < batch; ++b) {
      lens.push_back(kDecLens[size_t(b)]);
      kf.emplace_back();
      vf.emplace_back();
      for (int t = 0; t < kDecLens[size_t(b)]; ++t) {
        if (t % kDecPage == 0) table[size_t(b) * max_pages + t / kDecPage] = order[size_t(next++)];
        const size_t at = (size_t(table[size_t(b) * max_pages + t / kDecPage]) * kDecPage + t % kDecPage) * row;
        for (int i = 0; i < row; ++i) {
          k[at + i] = tilejit::float_to_bf16(2.f * normal(rng));
          v[at + i] = tilejit::float_to_bf16(2.f * normal(rng));
          kf.back().push_back(tilejit::bf16_to_float(k[at + i]));
          vf.back().push_back(tilejit::bf16_to_float(v[at + i]));
        }
      }
    }
    kv.k_pages = k.data();
    kv.v_pages = v.data();
    kv.block_table = table.data();
    kv.seq_lens = lens.data();
    kv.dtype = TILEJIT_DTYPE_BF16;
    kv.num_pages = num_pages;
    kv.page_size = kDecPage;
    kv.heads_kv = kDecHkv;
    kv.head_dim = D;
    kv.max_pages_per_seq = max_pages;
  }
};

/// float64 decode: q [batch, sq, Hq, D]; query i of sequence b at position len − sq + i; `visible` (q, kv) on
/// positions, and causal among the new tokens when `causal`.
Result decode_reference(const PagedInputs &in, const std::vector<double> &q, int sq, const RefMod &mod, bool causal) {
  const int batch = int(kDecLens.size());
  Result r{std::vector<double>(q.size(), 0.0), std::vector<double>(size_t(batch) * sq * kDecHq, 0.0)};
  const double scale = 1.0 / std::sqrt(double(D));
  for (int b = 0; b < batch; ++b) {
    const int L = kDecLens[size_t(b)];
    for (int i = 0; i < sq; ++i)
      for (int h = 0; h < kDecHq; ++h) {
        const int pos = L - sq + i, kh = h / (kDecHq / kDecHkv);
        const size_t row = (size_t(b) * sq + i) * kDecHq + h;
        std::vector<double> s(static_cast<size_t>(L), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < L; ++j) {
          if ((causal && j > pos) || (mod.visible && !mod.visible(b, pos, j))) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q[row * D + d] * in.kf[size_t(b)][(size_t(j) * kDecHkv + kh) * D + d];
          s[size_t(j)] = mod.score ? mod.score(dot * scale, b, h, pos, j) : dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        r.lse[row] = attend(s, mx, [&](int j) { return &in.vf[size_t(b)][(size_t(j) * kDecHkv + kh) * D]; },
                            &r.out[row * D]);
      }
  }
  return r;
}


int example_decode(const PagedInputs &in, const user_mods_params &p, const std::string &mod, int sq, bool causal,
                   const std::vector<uint16_t> &q, uint16_t *out, float *lse) {
  user_mods_decode_plan *plan = nullptr;
  if (user_mods_decode_plan_create(mod.c_str(), &p, &in.kv, int(kDecLens.size()), kDecHq, sq, 0, causal, &plan))
    return 1;
  int rc = user_mods_decode_plan_run(plan, q.data(), out, lse, &in.kv, nullptr);
  return user_mods_decode_plan_destroy(plan) || rc;
}

int c_abi_decode(const PagedInputs &in, const std::function<void(tilejit_flex_variant &)> &set, int sq,
                 const std::vector<uint16_t> &q, uint16_t *out, float *lse) {
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  set(var);
  tilejit_decode_plan *plan = nullptr;
  if (tilejit_decode_plan_create(&plan, &in.kv, int(kDecLens.size()), kDecHq, sq, 0, &var, 0.f, 0, 0, 0, 0))
    return 1;
  int rc = tilejit_decode_plan_run(plan, q.data(), out, lse, &in.kv, nullptr);
  return tilejit_decode_plan_destroy(plan) || rc;
}

/// Every decode mod (none, alibi, softcap, window) as the user lambda, the built-in and tilejit's C ABI plan,
/// with one new token and with three (causal among them).
void check_decode(const user_mods_params &base) {
  std::mt19937 rng(20240612);
  std::normal_distribution<float> normal(0.f, 1.f);
  const PagedInputs in(rng);
  const std::vector<float> slopes = tilejit::attention::alibi_slopes(kDecHq);
  user_mods_params p = base;
  p.alibi_slopes = slopes.data();
  struct DecodeMod {
    std::string name;
    RefMod ref;  // visible(b, q, kv) on positions
    std::function<void(tilejit_flex_variant &)> c_abi;
  };
  const std::vector<DecodeMod> mods{
      {"none", {}, [](tilejit_flex_variant &) {}},
      {"alibi",
       {[&](double s, int, int h, int q, int kv) { return s - double(slopes[size_t(h)]) * std::abs(q - kv); }, {}},
       [](tilejit_flex_variant &v) { v.alibi = 1; }},
      {"softcap",
       {[&](double s, int, int, int, int) { return p.softcap * std::tanh(s / p.softcap); }, {}},
       [&](tilejit_flex_variant &v) { v.softcap = p.softcap; }},
      {"window",
       {{}, [&](int, int q, int kv) { return kv <= q && q - kv <= p.window; }},
       [&](tilejit_flex_variant &v) { v.window_left = p.window; }},
  };
  for (int sq : {1, 3}) {
    const bool causal = sq > 1;
    const size_t rows = kDecLens.size() * size_t(sq) * kDecHq;
    std::vector<uint16_t> q;
    std::vector<double> qf;
    for (size_t i = 0; i < rows * D; ++i) {
      q.push_back(tilejit::float_to_bf16(2.f * normal(rng)));
      qf.push_back(tilejit::bf16_to_float(q.back()));
    }
    for (const DecodeMod &m : mods) {
      const std::string tag = "decode " + m.name + ", " + std::to_string(sq) + " new token(s)";
      std::printf("%s\n", tag.c_str());
      Result ref = decode_reference(in, qf, sq, m.ref, causal);
      Result lambda = run_rows(
          rows, [&](uint16_t *o, float *l) { return example_decode(in, p, m.name, sq, causal, q, o, l); },
          tag + " lambda", user_mods_last_error);
      compare(lambda, ref, m.name + " (user lambda) vs float64");
      if (m.name != "none") {
        Result built = run_rows(
            rows,
            [&](uint16_t *o, float *l) { return example_decode(in, p, "builtin:" + m.name, sq, causal, q, o, l); },
            tag + " built-in", user_mods_last_error);
        compare(built, ref, "builtin:" + m.name + " vs float64");
        if (!lambda.out.empty() && !built.out.empty()) {
          double diff = rel_frobenius(lambda.out, built.out);
          std::printf("  %-44s rel. difference %.2e\n", "lambda vs built-in", diff);
          expect(diff <= kOutTol, tag + ": lambda vs built-in differ by " + std::to_string(diff));
        }
      }
      // The C ABI's window is a band with its own causal side; the new tokens are causal among themselves.
      auto variant = [&](tilejit_flex_variant &v) {
        m.c_abi(v);
        v.causal = causal || v.window_left >= 0;
      };
      compare(run_rows(rows, [&](uint16_t *o, float *l) { return c_abi_decode(in, variant, sq, q, o, l); },
                       tag + " C ABI", tilejit_last_error),
              ref, "tilejit C ABI decode plan (" + m.name + ") vs float64");
    }
  }
  // Errors: a clear message, no crash.
  user_mods_decode_plan *plan = nullptr;
  int rc = user_mods_decode_plan_create("document", &p, &in.kv, 2, kDecHq, 1, 0, 0, &plan);
  std::string msg = user_mods_last_error();
  expect(rc != 0 && plan == nullptr && msg.find("'document' has no decode form") != std::string::npos,
         "decode with a mod without a decode form (got '" + msg + "')");
  tilejit_paged_kv f16 = in.kv;
  f16.dtype = TILEJIT_DTYPE_F16;
  rc = user_mods_decode_plan_create("alibi", &p, &f16, 2, kDecHq, 1, 0, 0, &plan);
  msg = user_mods_last_error();
  expect(rc != 0 && msg.find("is not bf16") != std::string::npos, "decode on an f16 cache (got '" + msg + "')");
  expect(user_mods_decode_plan_destroy(nullptr) == 0, "destroying a null plan");
}

}  // namespace

int main() {
  ::setenv("TILEJIT_INTERPRET", "1", 1);  // host pointers, CPU interpreter
  const Inputs in = make_inputs();
  const user_mods_params &p = in.p;
  const int M = p.max_distance;

  struct Case {
    std::string name;
    RefMod ref;
    std::function<void(tilejit_flex_variant &)> c_abi;  // empty: tilejit's C ABI has no such variant
  };
  std::vector<Case> cases{
      {"alibi",
       {[&](double s, int, int h, int q, int kv) { return s - double(in.slopes[size_t(h)]) * std::abs(q - kv); }, {}},
       [](tilejit_flex_variant &v) { v.alibi = 1; }},
      {"softcap",
       {[&](double s, int, int, int, int) { return p.softcap * std::tanh(s / p.softcap); }, {}},
       [&](tilejit_flex_variant &v) { v.softcap = p.softcap; }},
      {"window",
       {{}, [&](int, int q, int kv) { return kv <= q && q - kv <= p.window; }},
       [&](tilejit_flex_variant &v) { v.causal = 1, v.window_left = p.window; }},
      {"document",
       {{}, [&](int b, int q, int kv) { return in.doc_ids[size_t(b) * S + q] == in.doc_ids[size_t(b) * S + kv]; }},
       [&](tilejit_flex_variant &v) { v.doc_ids = in.doc_ids.data(); }},
      {"prefix_lm", {{}, [&](int, int q, int kv) { return kv <= q || kv < p.prefix_len; }}, {}},
      {"relbias",
       {[&](double s, int, int h, int q, int kv) {
          return s + double(in.table[size_t(h) * (2 * M + 1) + size_t(std::clamp(kv - q, -M, M) + M)]);
        },
        {}},
       {}},
  };

  for (const Case &c : cases) {
    std::printf("%s\n", c.name.c_str());
    Result ref = reference(in, c.ref);
    const std::string builtin = "builtin:" + c.name;
    Result lambda = run([&](uint16_t *o, float *l) { return example_forward(in, c.name, o, l); }, c.name + " lambda",
                        user_mods_last_error);
    Result built = run([&](uint16_t *o, float *l) { return example_forward(in, builtin, o, l); }, builtin,
                       user_mods_last_error);
    compare(lambda, ref, c.name + " (user lambda) vs float64");
    compare(built, ref, builtin + " vs float64");
    if (!lambda.out.empty() && !built.out.empty()) {
      double diff = rel_frobenius(lambda.out, built.out);
      std::printf("  %-44s rel. difference %.2e\n", "lambda vs built-in", diff);
      expect(diff <= kOutTol, c.name + ": lambda vs built-in differ by " + std::to_string(diff));
    }
    // The backward: the lambda's traced derivative gives the built-in's gradients (each checked against
    // float64 by tilejit's tests).
    const std::vector<double> g_lambda = gradients(in, c.name), g_built = gradients(in, builtin);
    if (!g_lambda.empty() && !g_built.empty()) {
      double diff = rel_frobenius(g_lambda, g_built);
      std::printf("  %-44s rel. difference %.2e\n", "backward: lambda vs built-in", diff);
      expect(diff <= kOutTol, c.name + ": backward lambda vs built-in differ by " + std::to_string(diff));
    }
    if (c.c_abi)
      compare(run([&](uint16_t *o, float *l) { return c_abi_forward(in, c.c_abi, o, l); }, c.name + " C ABI",
                  tilejit_last_error),
              ref, "tilejit C ABI built-in vs float64");
    // Masks with a block mask built once beforehand (the band builtin:window needs none).
    if (c.ref.visible)
      for (const std::string &mod : {c.name, builtin}) {
        if (mod == "builtin:window") continue;
        for (auto [bm, bn] : {std::pair{16, 32}, std::pair{32, 16}}) {
          std::string what = mod + " with a block mask " + std::to_string(bm) + "x" + std::to_string(bn);
          int handle = 0;
          if (user_mods_build_block_mask(mod.c_str(), &p, B, H, S, D, bm, bn, nullptr, &handle) != 0) {
            expect(false, what + ": " + user_mods_last_error());
            continue;
          }
          compare(run([&](uint16_t *o, float *l) { return example_forward(in, mod, o, l, handle); }, what,
                      user_mods_last_error),
                  ref, what + " vs float64");
          // The same mod without the handle still builds its own block mask per call.
          compare(run([&](uint16_t *o, float *l) { return example_forward(in, mod, o, l); }, mod + " again",
                      user_mods_last_error),
                  ref, mod + " (block mask per call) vs float64");
          // The backward walking the prebuilt block mask (at its block sizes) gives the gradients of one
          // that builds its own (each checked against float64 by tilejit's tests).
          if (bm < bn) {
            const std::vector<double> g_pre = gradients(in, mod, handle), g_own = gradients(in, mod);
            if (!g_pre.empty() && !g_own.empty()) {
              double diff = rel_frobenius(g_pre, g_own);
              std::printf("  %-44s rel. difference %.2e\n", "backward: prebuilt vs own block mask", diff);
              expect(diff <= kOutTol, what + ": backward gradients differ by " + std::to_string(diff));
            }
          }
          expect(user_mods_drop_block_masks() == 0, "drop block masks");
        }
      }
  }

  // Errors: a clear message, no crash.
  std::vector<uint16_t> out(size_t(B) * H * S * D);
  std::vector<float> lse(size_t(B) * H * S);
  auto fails_with = [&](int rc, const std::string &needle, const std::string &what) {
    std::string msg = user_mods_last_error();
    expect(rc != 0 && msg.find(needle) != std::string::npos,
           what + " (got rc " + std::to_string(rc) + ", '" + msg + "')");
  };
  fails_with(example_forward(in, "nope", out.data(), lse.data()), "unknown mod 'nope'", "an unknown mod");
  int handle = 0;
  fails_with(user_mods_build_block_mask("builtin:window", &p, B, H, S, D, 16, 16, nullptr, &handle),
             "no mask function", "a block mask for a band");
  user_mods_params bad = p;
  bad.softcap = 0.f;
  fails_with(user_mods_forward("softcap", &bad, 0, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), B, H,
                               S, D, 0, nullptr),
             "must be > 0", "a zero cap");
  expect(user_mods_build_block_mask("window", &p, B, H, S, D, 16, 16, nullptr, &handle) == 0 && handle > 0,
         "block mask for window");
  fails_with(user_mods_forward("window", &p, handle, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), 1,
                               H, S, D, 0, nullptr),
             "block mask was built for batch 2", "a block mask of another shape");
  fails_with(example_forward(in, "document", out.data(), lse.data(), handle), "was built for mod 'window'",
             "a block mask of another mod");
  fails_with(example_forward(in, "window", out.data(), lse.data(), handle + 1), "unknown",
             "an unknown block-mask handle");
  std::vector<uint16_t> grads(3 * out.size());
  fails_with(user_mods_backward("document", &p, handle, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                                in.v.data(), grads.data(), grads.data() + out.size(), grads.data() + 2 * out.size(), B,
                                H, S, D, nullptr),
             "was built for mod 'window'", "the backward given a block mask of another mod");
  user_mods_drop_block_masks();

  check_decode(p);

  if (g_failures) {
    std::printf("%d check(s) FAILED\n", g_failures);
    return 1;
  }
  std::printf("all user mods match float64 and the built-ins\n");
  return 0;
}
