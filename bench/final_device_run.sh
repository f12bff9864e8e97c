#!/usr/bin/env bash
# One device call at the end of a session: all GPU tests, the full side-by-side protocol (issue 3), and
# flex attention's mods beside FlexAttention on the same inputs (issue 4) in two tile configs.
# Expects ./carry (stripped libtilejit.so.0, tilejit_gpu_tests). Logs and tables go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry TILEJIT_CACHE_DIR=/tmp/tj-cache PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 carry/tilejit_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "FAILED|with expansion" -A3 "$out/gpu_tests.log" | head -20; tail -3 "$out/gpu_tests.log"
TILEJIT_PRINT_AUTOTUNING=1 timeout 200 python3 bench/side_by_side.py --lib carry/libtilejit.so.0 \
  --out "$out/side_by_side.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"; echo "side_by_side rc=$?"
for cfg in "128 64 8" "64 64 4"; do
  set -- $cfg
  timeout 100 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --block-m $1 --block-n $2 \
    --num-warps $3 --num-stages 2 --out "$out/flex_$1x$2x$3.md" > "$out/flex_$1x$2x$3.log" 2>&1
  echo "flex $cfg rc=$?"
done
