#!/usr/bin/env python3
"""Runs tilejit's flex attention once per call for one mod (autotuned; the protocol shape at one seqlen:
head_dim 128, 16 heads, bf16, batch = 16384 / seqlen), for profilers: with a warm autotune cache
(TILEJIT_CACHE_DIR) the first launch of flex_attention_fwd is the winner's.

Usage: python3 bench/flex_profile_driver.py --lib carry/libtilejit.so.0 --mod alibi [--seqlen 1024] [--calls 3]
"""
import argparse
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flex_side_by_side import HEAD_DIM, HEADS, TOKENS, load_flex, tilejit_flex, tilejit_variant  # noqa: E402
from side_by_side import load_tilejit  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--mod", default="none", choices=["none", "alibi", "softcap50", "causal", "causal-window256"])
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    import torch
    lib = load_flex(load_tilejit(args.lib))
    b = TOKENS // args.seqlen
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, HEADS, args.seqlen, HEAD_DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in range(3))
    out = torch.empty_like(q)
    cfg = types.SimpleNamespace(block_m=0, block_n=0, num_warps=0, num_stages=0, autotune=True)
    variant = tilejit_variant(lib, args.mod, None, cfg)
    for _ in range(args.calls):
        tilejit_flex(lib, q, k, v, out, variant)
    torch.cuda.synchronize()
    print(args.mod, args.seqlen, "ok", float(out.float().abs().mean()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
