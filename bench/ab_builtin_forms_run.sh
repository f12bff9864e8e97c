#!/usr/bin/env bash
# A/B of the built-in ALiBi (blocks split by side of the diagonal: one fma per score) and soft-capping
# (SOFTCAP_BOUND: a fixed softmax reference instead of the running max) against the previous forms
# (TILEJIT_FLEX_AB_OLD=1), flex attention autotuned, none/alibi/softcap50 beside FlexAttention. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
for variant in new old; do
  if [ $variant = old ]; then export TILEJIT_FLEX_AB_OLD=1; else unset TILEJIT_FLEX_AB_OLD; fi
  TILEJIT_CACHE_DIR=/tmp/tj-ab-$variant timeout 200 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi,softcap50 --out "$out/flex_$variant.md" > "$out/flex_$variant.log" 2> "$out/flex_$variant.err"
  echo "== $variant rc=$?"
  grep -E "^\| [a-z]" "$out/flex_$variant.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
  grep winner "$out/flex_$variant.err" | sed 's/; stored.*//'
done
