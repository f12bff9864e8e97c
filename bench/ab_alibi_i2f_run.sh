#!/usr/bin/env bash
# A/B: the built-in ALiBi with its column positions converted by cvt.rn.f32.s32 (I2F) or by the exponent
# trick (TILEJIT_AB_MAGIC_I2F=1: an integer add and a float subtract), flex attention autotuned, beside
# FlexAttention; soft-capping with SOFTCAP_BOUND; then every GPU test and the SASS of the loops. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
for variant in base magic; do
  mods=none,alibi,softcap50
  if [ $variant = magic ]; then export TILEJIT_AB_MAGIC_I2F=1; mods=none,alibi; else unset TILEJIT_AB_MAGIC_I2F; fi
  TILEJIT_CACHE_DIR=/tmp/tj-ab-$variant timeout 170 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods $mods --out "$out/flex_$variant.md" > "$out/flex_$variant.log" 2> "$out/flex_$variant.err"
  echo "== $variant rc=$?"
  grep -E "^\| [a-z]" "$out/flex_$variant.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
  grep winner "$out/flex_$variant.err" | sed 's/; stored.*//'
done
unset TILEJIT_AB_MAGIC_I2F
for c in carry/sass/*.cubin; do cuobjdump -sass "$c" > "$out/$(basename "$c" .cubin).sass" 2>&1 || nvdisasm "$c" > "$out/$(basename "$c" .cubin).sass" 2>&1; done
ls -la "$out"/*.sass | head
run_gpu_tests 200
