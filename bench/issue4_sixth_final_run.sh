#!/usr/bin/env bash
# Final device call of the sixth session: every GPU test; flex attention's mods beside FlexAttention
# (autotuned, issue 4) with ALiBi's distance through index_to_f32 (f32(q_idx − start_n − first column) per
# row, an immediate per score); then at seqlen 1024, none and alibi in fresh processes, alternating this
# build (C: carry/libtilejit.so.0) with the implicit-rewrite build of 9ea36cc (A: carry/ab/libA.so.0).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
flex_table 240
i=0
for v in A C C A; do
  i=$((i + 1))
  lib=carry/libtilejit.so.0; [ $v = A ] && lib=carry/ab/libA.so.0
  TILEJIT_CACHE_DIR=/tmp/tj-fin-$i timeout 100 python3 bench/flex_side_by_side.py --lib $lib --autotune \
    --mods none,alibi --seqlens 1024 --out "$out/ab_$i$v.md" > "$out/ab_$i$v.log" 2> "$out/ab_$i$v.err"
  echo "== $i $v rc=$?"
  grep -E "^\| [a-z]" "$out/ab_$i$v.md" | awk -F'|' '{print $2, $3, $5, $10}'
done
