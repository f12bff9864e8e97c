// Float64 reference attention, used by the CLI's checks and the tests: sampled rows of plain attention, and
// one (sequence, head) of any variant with its mods given as host functions.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace tilejit::tools {

struct RowRef {
  std::vector<double> out;  // head_dim values
  double lse;               // natural-log logsumexp of the scaled scores (-inf if no key is visible)
};

/// Reference for query row i of head (b, h). q/k/v hold the inputs already widened to float (the exact
/// bf16/f16 values), layout [batch, heads, seqlen, head_dim].
RowRef reference_row(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                     int heads, int seqlen_q, int seqlen_k, int head_dim, double scale, bool causal, int b,
                     int h, int i);

/// Host versions of a variant's mods. q and kv are the positions the mods see (with a paged cache the queries
/// are a sequence's last tokens: q = seqlen_k − seqlen_q + i); seqlen_q / seqlen_k are the sequence's query and
/// key counts.
struct RefMods {
  std::function<double(double s, int b, int h, int q, int kv)> score;                  // empty: identity
  std::function<bool(int b, int h, int q, int kv, int seqlen_q, int seqlen_k)> visible;  // empty: all
};

/// A [rows, head dim] matrix inside a float array: element (r, d) at data[r·row_stride + d].
struct RefRows {
  const float *data;
  int64_t row_stride;
};

/// Float64 attention of one (sequence b, query head h): sq query rows against sk keys, query row i at
/// position q_pos0 + i; scores q·k·scale, then mods.score, then −inf where mods.visible is false. Writes
/// out[i·out_stride + d] for d < dv and lse[i·lse_stride] (natural log); a row that sees no key gets 0 and −inf.
/// Returns the number of such rows.
int reference_head(const RefMods &mods, int b, int h, int sq, int sk, int q_pos0, int dq, int dv, double scale,
                   RefRows q, RefRows k, RefRows v, double *out, int64_t out_stride, double *lse, int64_t lse_stride);

/// Float64 gradients of one (sequence b, query head h) of a variant, positions 0…sq−1 and 0…sk−1: adds the
/// gradients of Σ dout ∘ out into dq (sq rows of dq_dim), dk (sk rows of dq_dim) and dv (sk rows of dv_dim),
/// contiguous rows, so that a GQA group's heads accumulate into one KV head's dk and dv. The mod's derivative is
/// taken by central differences of mods.score (step 1e-6 relative). on_dz, when given, is called with each
/// visible score's gradient of the mod's output, dZ = P ∘ (dP − D) (a learnable capture's expected gradient
/// is a sum of these). magnitudes, when given, receives the same sums over every term's magnitude (|dS| bounded by
/// P·(|dP| + |D|)·|score'|·scale, |k|, |q|): the scale of dq's and dk's rounding error where their terms cancel, as
/// in a row that sees one key, whose dq is exactly 0. Returns the number of rows that see no key (their gradients
/// are 0).
struct RefGradMagnitudes {
  double *dq = nullptr, *dk = nullptr;  ///< laid out as dq and dk
};
int reference_head_backward(const RefMods &mods, int b, int h, int sq, int sk, int dq_dim, int dv_dim, double scale,
                            RefRows q, RefRows k, RefRows v, RefRows dout, double *dq, double *dk, double *dv,
                            const std::function<void(int i, int j, double dz)> &on_dz = {},
                            RefGradMagnitudes magnitudes = {});

/// The backward checks' error of one gradient from its sums of squares (error, reference, and the reference's
/// term magnitudes, RefGradMagnitudes; 0 where there are none): ‖got − ref‖ / max(‖ref‖, tol·‖magnitudes‖). This
/// is the relative Frobenius error, except where the gradient's terms cancel (a row seeing one key has dq = 0
/// exactly, its terms P·(dP − D) rounding to ~ε·|dP|). Checked against tol, the bound is tol·‖ref‖ where
/// ‖ref‖ ≥ tol·‖magnitudes‖ (no cancellation: ‖ref‖ is then within a small factor of ‖magnitudes‖), and
/// tol²·‖magnitudes‖ where the terms cancel below that, the scale of their rounding.
double gradient_error(double err2, double ref2, double mag2, double tol);

}  // namespace tilejit::tools
