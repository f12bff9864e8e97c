#!/usr/bin/env bash
# A/B: the built-in ALiBi's column part added by a k=16 tensor-core product (default) against the distance
# form (TILEJIT_AB_ALIBI_DIST=1), with exp2 as ex2.approx.ftz; soft-capping with SOFTCAP_BOUND; flex attention
# autotuned beside FlexAttention; then every GPU test. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
for variant in mma dist; do
  mods=none,alibi,softcap50
  if [ $variant = dist ]; then export TILEJIT_AB_ALIBI_DIST=1; mods=none,alibi; else unset TILEJIT_AB_ALIBI_DIST; fi
  TILEJIT_CACHE_DIR=/tmp/tj-ab-$variant timeout 170 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods $mods --out "$out/flex_$variant.md" > "$out/flex_$variant.log" 2> "$out/flex_$variant.err"
  echo "== $variant rc=$?"
  grep -E "^\| [a-z]" "$out/flex_$variant.md" | awk -F'|' '{print $2, $3, $4, $5, $8, $9, $10}'
  grep winner "$out/flex_$variant.err" | sed 's/; stored.*//'
done
unset TILEJIT_AB_ALIBI_DIST
run_gpu_tests 200
