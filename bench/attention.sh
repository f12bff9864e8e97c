#!/usr/bin/env bash
# Runs the issue-2 attention shapes through `tilejit attention --check` on the GPU, then PyTorch's SDPA
# backends on the same shapes (bench/peers_sdpa.py), in one call on the device machine.
# Usage: bench/attention.sh <build-dir>
set -uo pipefail
bin=${1:-build}/tools/tilejit
$bin attention --backend gpu --check --batch 8 --heads 12 --seqlen-q 1024 --head-dim 64 --causal
$bin attention --backend gpu --check --batch 1 --heads 32 --seqlen-q 4096 --head-dim 128 --causal
$bin attention --backend gpu --check --batch 4 --heads 16 --seqlen-q 1000 --head-dim 64
python3 "$(dirname "$0")/peers_sdpa.py"
