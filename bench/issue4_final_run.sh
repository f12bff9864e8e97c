#!/usr/bin/env bash
# Last device call of the fourth session: every GPU test, then flex attention's mods beside FlexAttention on
# the same inputs, tilejit autotuned per mod and seqlen (issue 4). Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
run_gpu_tests 300
timeout 240 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --autotune --out "$out/flex_autotuned.md" \
  > "$out/flex_autotuned.log" 2> "$out/flex_autotuned.err"; echo "flex rc=$?"
grep -E "^\| [a-z]" "$out/flex_autotuned.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
grep winner "$out/flex_autotuned.err" | sed 's/; stored.*//'
