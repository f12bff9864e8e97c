#!/usr/bin/env bash
# The built-in ALiBi with its distance as (q − start_n) − offs_n in f32 (an implicit codegen rewrite, since
# replaced by index_to_f32: one FADD of an immediate per score, no per-column conversion): every GPU test,
# then none and alibi beside FlexAttention, autotuned. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
run_gpu_tests 200
timeout 150 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --autotune --mods none,alibi \
  --out "$out/flex.md" > "$out/flex.log" 2> "$out/flex.err"
echo "rc=$?"
grep -E "^\| [a-z]" "$out/flex.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
grep winner "$out/flex.err" | sed 's/; stored.*//'
