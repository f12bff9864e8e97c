#!/usr/bin/env bash
# Same-machine A/B at seqlen 1024 (none and alibi, autotuned, fresh process and cache each): A = ALiBi's
# distance as (q − start_n) − f32(offs_n) through the implicit x ± f32(arange) rewrite (commit 9ea36cc),
# B = index_to_f32 of (rows − start_n) − offs_n (312dfc8). Order A B B A. Expects carry/ab.
source "$(dirname "$0")/device_prelude.sh"
i=0
for v in A B B A; do
  i=$((i + 1))
  TILEJIT_CACHE_DIR=/tmp/tj-ab2-$i timeout 100 python3 bench/flex_side_by_side.py --lib carry/ab/lib$v.so.0 \
    --autotune --mods none,alibi --seqlens 1024 --out "$out/ab_$i$v.md" > "$out/ab_$i$v.log" 2> "$out/ab_$i$v.err"
  echo "== $i $v rc=$?"
  grep -E "^\| [a-z]" "$out/ab_$i$v.md" | awk -F'|' '{print $2, $3, $5, $10}'
done
