#!/usr/bin/env bash
# Device check for two programs per SM (min_ctas_per_sm 2 for 8-warp configs, autotuning candidates behind
# TILEJIT_AUTOTUNE_TWO_PER_SM=1 until this has run; if it helps, make two_per_sm_candidates() default on): every GPU test, the attention tuning tables of the short shapes (MIN_CTAS=2 rows beside
# the others), the short-sequence side-by-side and the flex mods, autotuned. Expects ./carry.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry TILEJIT_CACHE_DIR=/tmp/tj-minctas PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
timeout 120 carry/tilejit_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "FAILED|with expansion" -A3 "$out/gpu_tests.log" | head -20; tail -2 "$out/gpu_tests.log"
for c in "" "--causal"; do
  timeout 60 carry/tilejit tune attention --batch 16 --heads 16 --seqlen-q 1024 --head-dim 128 $c \
    > "$out/tune_d128_s1024$c.txt" 2>&1; grep -E "MIN_CTAS|winner" "$out/tune_d128_s1024$c.txt"
done
timeout 150 python3 bench/side_by_side.py --lib carry/libtilejit.so.0 --skip matmul,compile --shapes s1024,s2048 \
  --out "$out/sbs_short.md" > "$out/sbs_short.log" 2>&1; echo "sbs rc=$?"
grep -E "^d(64|128)" "$out/sbs_short.log" | awk '{print $1, $4, $5, $9}'
TILEJIT_PRINT_AUTOTUNING=1 timeout 150 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --autotune \
  --out "$out/flex_autotuned.md" > "$out/flex.log" 2> "$out/flex.err"; echo "flex rc=$?"
grep -E "winner" "$out/flex.err" | sed 's/; stored.*//'
