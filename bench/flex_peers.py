#!/usr/bin/env python3
"""FlexAttention (torch.compile'd) with the same mods as `bench/flex_mods.sh` runs through tilejit's CLI:
no mod, ALiBi, tanh soft-cap 50, causal sliding window 256 — bf16, head_dim 128, 16 heads, 16384 tokens.
Prints ms and TFLOP/s (FLOPs of the full square for non-causal rows, of the causal half for causal rows;
the sliding window row counts the full causal half too, so its TFLOP/s is an 'effective' rate)."""
import math
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from side_by_side import median_ms as bench  # one timing method for every bench script

torch._dynamo.config.cache_size_limit = 64
flex = torch.compile(flex_attention, dynamic=False)


def alibi_slopes(h):
    # ALiBi (Press et al.): 2^(-8 i / n) for n a power of two; interleave for other counts.
    def pow2(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]
    if math.log2(h).is_integer():
        return pow2(h)
    c = 2 ** math.floor(math.log2(h))
    return pow2(c) + pow2(2 * c)[0::2][: h - c]


def main():
    d, h = 128, 16
    for s in (4096, 16384):
        b = 16384 // s
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        slopes = torch.tensor(alibi_slopes(h), device="cuda", dtype=torch.float32)

        def alibi(score, bi, hi, qi, ki):
            return score + slopes[hi] * (ki - qi)

        def softcap(score, bi, hi, qi, ki):
            return 50.0 * torch.tanh(score / 50.0)

        def causal(bi, hi, qi, ki):
            return qi >= ki

        def window(bi, hi, qi, ki):
            return (qi >= ki) & (qi - ki <= 256)

        full = 4 * b * h * s * s * d
        bm_causal = create_block_mask(causal, b, h, s, s)
        bm_window = create_block_mask(window, b, h, s, s)
        rows = [("none", None, None, full), ("alibi", alibi, None, full), ("softcap50", softcap, None, full),
                ("causal", None, bm_causal, full / 2), ("causal-window256", None, bm_window, full / 2)]
        for name, sm, bm, flops in rows:
            try:
                ms = bench(lambda: flex(q, k, v, score_mod=sm, block_mask=bm))
                print(f"flex s={s:6d} b={b:2d} {name:18s} {ms:9.3f} ms {flops / ms / 1e9:8.1f} TFLOP/s")
            except Exception as ex:
                print(f"flex s={s:6d} b={b:2d} {name:18s} failed: {str(ex).splitlines()[0][:100]}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
