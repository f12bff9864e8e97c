#!/usr/bin/env bash
# One device call at the end of a session: all GPU tests, the issue-2 attention checks, the side-by-side
# quick table, and the flex mods vs FlexAttention. Expects ./carry (stripped libtilejit.so.0, tilejit,
# tilejit_gpu_tests, tools/tilejit). Logs go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry TILEJIT_CACHE_DIR=/tmp/tj-cache PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 carry/tilejit_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"; tail -4 "$out/gpu_tests.log"
timeout 100 bash bench/attention.sh carry > "$out/attention.log" 2>&1; grep -E "^attention|time|check|flash2|cudnn" "$out/attention.log"
timeout 150 python3 bench/side_by_side.py --lib carry/libtilejit.so.0 --quick --skip compile --out "$out/side_by_side_quick.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"; grep -E "^d|matmul" "$out/side_by_side.log"
timeout 150 bash bench/flex_mods.sh carry > "$out/flex_mods.log" 2>&1; cat "$out/flex_mods.log" | grep -v "^\s*$" | tail -40
