#!/usr/bin/env bash
# One device call at the end of a session: all GPU tests, flex attention's mods beside FlexAttention on the
# same inputs with tilejit autotuned per mod and seqlen (issue 4), and the full side-by-side protocol
# (issue 3). Expects ./carry (stripped libtilejit.so.0, tilejit_gpu_tests). Logs and tables go to $OUT.
source "$(dirname "$0")/device_prelude.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run_gpu_tests ${GPU_TESTS_TIMEOUT:-300}
TILEJIT_PRINT_AUTOTUNING=1 timeout ${FLEX_TIMEOUT:-190} python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
  --autotune --out "$out/flex_autotuned.md" > "$out/flex_autotuned.log" 2> "$out/flex_autotuned.err"
echo "flex autotuned rc=$?"; grep -E "winner" "$out/flex_autotuned.err" | head -20
TILEJIT_PRINT_AUTOTUNING=1 timeout ${SBS_TIMEOUT:-250} python3 bench/side_by_side.py --lib carry/libtilejit.so.0 \
  --out "$out/side_by_side.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"; echo "side_by_side rc=$?"
