#!/usr/bin/env bash
# Ninth session, third device call: every GPU test; at seqlen 1024 none and alibi twice (ALiBi as an if/else
# around mods+softmax, row sum after p·v); then the full flex table, autotuned, side by side with
# FlexAttention (bench/results/2026-11-30-issue4-ninth-session-h200.md names the commit).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
for i in 1 2; do
  TILEJIT_CACHE_DIR=/tmp/tj-fin9-$i timeout 70 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi --seqlens 1024 --out "$out/fin_$i.md" > /dev/null 2> "$out/fin_$i.err"
  echo "== $i rc=$?"; grep -E "^\| [a-z]" "$out/fin_$i.md" | awk -F'|' '{print $2, $3, $5, $10}'
  grep -E "winner" "$out/fin_$i.err"; rm -f "$out/fin_$i.err"
done
flex_table 270
