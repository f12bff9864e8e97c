#!/usr/bin/env bash
# Ninth session, fifth device call: seqlen 1024, none and alibi, --interleave 10 with the order within each pair
# alternating (call 4 always timed the mod first).
source "$(dirname "$0")/device_prelude.sh"
TILEJIT_CACHE_DIR=/tmp/tj-il-3 timeout 110 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
  --autotune --interleave 10 --mods none,alibi --seqlens 1024 --out "$out/il_order.md" > "$out/il_order.log" 2>&1
echo "rc=$?"
grep -E "^\| [a-z]|interleaved overhead" "$out/il_order.log" | awk -F'|' 'NF>3 {print $2, $3, $5, $10, $11; next} {print}'
