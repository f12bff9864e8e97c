#!/usr/bin/env bash
# Last device call of the fourth session: every GPU test, then flex attention's mods beside FlexAttention on
# the same inputs, tilejit autotuned per mod and seqlen (issue 4). Expects ./carry.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry TILEJIT_CACHE_DIR=/tmp/tj-final4-$$ PYTHONUNBUFFERED=1 TILEJIT_PRINT_AUTOTUNING=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
timeout 300 carry/tilejit_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "FAILED|with expansion" -A3 "$out/gpu_tests.log" | head -20; tail -2 "$out/gpu_tests.log"
timeout 240 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --autotune --out "$out/flex_autotuned.md" \
  > "$out/flex_autotuned.log" 2> "$out/flex_autotuned.err"; echo "flex rc=$?"
grep -E "^\| [a-z]" "$out/flex_autotuned.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
grep winner "$out/flex_autotuned.err" | sed 's/; stored.*//'
