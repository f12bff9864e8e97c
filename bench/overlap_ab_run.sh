#!/usr/bin/env bash
# A/B of the flex kernel's rotated key-block loop (TILEJIT_FLEX_OVERLAP=1: q·k of block j+1 issued before
# the softmax of block j) with deferred wgmma waits (TILEJIT_WGMMA_DEFERRED_WAIT=1), each variant in its own
# process and cache: every GPU test with both on, then flex mods beside FlexAttention, autotuned, A then B.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry PYTHONUNBUFFERED=1 TILEJIT_PRINT_AUTOTUNING=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
TILEJIT_CACHE_DIR=/tmp/tj-b TILEJIT_FLEX_OVERLAP=1 TILEJIT_WGMMA_DEFERRED_WAIT=1 timeout 130 carry/tilejit_gpu_tests \
  > "$out/gpu_tests_b.log" 2>&1; echo "gpu tests (B) rc=$?"
grep -E "FAILED|with expansion" -A3 "$out/gpu_tests_b.log" | head -20; tail -2 "$out/gpu_tests_b.log"
run() {  # name, mods, env...
  local name=$1 mods=$2; shift 2
  env TILEJIT_CACHE_DIR=/tmp/tj-$name "$@" timeout 200 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods "$mods" --out "$out/flex_$name.md" > "$out/flex_$name.log" 2> "$out/flex_$name.err"
  echo "flex $name rc=$?"; grep -E "^\| [a-z]" "$out/flex_$name.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
  grep winner "$out/flex_$name.err" | sed 's/; stored.*//'
}
run a none,alibi,softcap50,causal-window256
run b none,alibi,softcap50 TILEJIT_FLEX_OVERLAP=1 TILEJIT_WGMMA_DEFERRED_WAIT=1
