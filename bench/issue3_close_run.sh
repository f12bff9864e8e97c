#!/usr/bin/env bash
# Device call for closing issue 3: every GPU test, then the full side-by-side protocol (attention autotuned
# per shape with the register-capped candidates on by default, matmul, compile time). Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run_gpu_tests 300
TILEJIT_PRINT_AUTOTUNING=1 timeout ${SBS_TIMEOUT:-420} python3 bench/side_by_side.py --lib carry/libtilejit.so.0 \
  --out "$out/side_by_side.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"; echo "side_by_side rc=$?"
grep -E "^\| d(64|128)" "$out/side_by_side.md" | awk -F'|' '{print $2, $4, $5, $9}'
grep -E "winner" "$out/side_by_side.err" | sed 's/; stored.*//'
