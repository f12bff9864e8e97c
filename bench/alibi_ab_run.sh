#!/usr/bin/env bash
# A/B of two builds of libtilejit (carry/ab/libA.so.0, carry/ab/libB.so.0) on none and alibi, autotuned, each
# in its own process and cache: A, B over seqlens 1024/4096/16384, then B, A again at 1024 (order effects).
# Used for: A = the slope's division before the pipeline's first copies, B = traced in the loop (hoisted to
# the preheader, after them).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
ab() {  # ab NAME SEQLENS
  TILEJIT_CACHE_DIR=/tmp/tj-ab-$1-$2 timeout 150 python3 bench/flex_side_by_side.py --lib carry/ab/lib$1.so.0 \
    --autotune --mods none,alibi --seqlens "$2" --out "$out/flex_$1_$2.md" > "$out/flex_$1_$2.log" \
    2> "$out/flex_$1_$2.err"
  echo "== $1 seqlens $2 rc=$?"
  grep -E "^\| [a-z]" "$out/flex_$1_$2.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
  grep winner "$out/flex_$1_$2.err" | sed 's/; stored.*//'
}
ab A 1024,4096,16384
ab B 1024,4096,16384
ab B 1024
ab A 1024
