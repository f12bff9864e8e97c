#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention backends on the shapes of `bench/attention.sh`, on the same
GPU in the same device call, so tilejit's numbers sit beside its peers'. FLOPs as in the FlashAttention
papers: 4·b·h·sq·sk·d, halved when causal. Prints one line per (shape, backend): ms and TFLOP/s."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from side_by_side import median_ms as bench  # one timing method for every bench script

SHAPES = [  # (name, batch, heads, seqlen, head_dim, causal)
    ("gpt2-small", 8, 12, 1024, 64, True),
    ("llama3-8b", 1, 32, 4096, 128, True),
    ("noncausal-1000", 4, 16, 1000, 64, False),
]
BACKENDS = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "mem-efficient": SDPBackend.EFFICIENT_ATTENTION}


def main():
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, cudnn {torch.backends.cudnn.version()}")
    for name, b, h, s, d, causal in SHAPES:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        for bname, be in BACKENDS.items():
            try:
                with sdpa_kernel(be):
                    ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                print(f"{name:16s} {bname:14s} {ms:9.3f} ms {flops / ms / 1e9:8.1f} TFLOP/s")
            except Exception as ex:  # a backend may not support a shape
                print(f"{name:16s} {bname:14s} unavailable: {str(ex).splitlines()[0][:80]}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
