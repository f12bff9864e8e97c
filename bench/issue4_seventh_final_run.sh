#!/usr/bin/env bash
# Final device call of the seventh session: every GPU test; flex attention's mods beside FlexAttention
# (autotuned, issue 4) with ALiBi through fma_index; then none and alibi at seqlen 1024 twice more, each in
# a fresh process and autotune cache.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
flex_table 260
for i in 1 2; do
  TILEJIT_CACHE_DIR=/tmp/tj-fin7-$i timeout 70 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi --seqlens 1024 --out "$out/rep_$i.md" > /tmp/rep_$i.log 2> /tmp/rep_$i.err
  echo "== repeat $i rc=$?"
  grep -E "^\| [a-z]" "$out/rep_$i.md" | awk -F'|' '{print $2, $3, $5, $10}'
done
