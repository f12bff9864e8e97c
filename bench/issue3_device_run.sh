#!/usr/bin/env bash
# One device call for issue 3: all GPU tests, then the full side-by-side protocol (attention at seqlens
# 512…16384, d 64/128, causal and not; matmul 4096³ and 8192³; compile times). Expects ./carry (stripped
# libtilejit.so.0, tilejit_gpu_tests). Logs and the markdown table go to $OUT.
source "$(dirname "$0")/device_prelude.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run_gpu_tests ${GPU_TESTS_TIMEOUT:-300}
TILEJIT_PRINT_AUTOTUNING=1 timeout ${SBS_TIMEOUT:-330} python3 bench/side_by_side.py --lib carry/libtilejit.so.0 \
  ${SBS_ARGS:-} --out "$out/side_by_side.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"
echo "side_by_side rc=$?"; grep -E "^\|" "$out/side_by_side.log" | cut -c1-200; tail -3 "$out/side_by_side.err"
