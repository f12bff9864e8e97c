#!/usr/bin/env bash
# Ninth session, fourth device call: the full flex table with --interleave 7 (each mod's overhead also as the
# median of back-to-back pairs with no mod), then seqlen 1024 once more with --interleave 9 in a fresh process.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 300 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --autotune --interleave 7 \
  --out "$out/flex_interleaved.md" > "$out/flex_interleaved.log" 2> "$out/flex_interleaved.err"
echo "flex rc=$?"
grep -E "^\| [a-z]" "$out/flex_interleaved.md" | awk -F'|' '{print $2, $3, $4, $5, $9, $10, $11}'
grep -E "interleaved overhead" "$out/flex_interleaved.log"
TILEJIT_CACHE_DIR=/tmp/tj-il-2 timeout 90 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
  --autotune --interleave 9 --mods none,alibi,softcap50,document --seqlens 1024 --out "$out/il_1024.md" \
  > "$out/il_1024.log" 2>&1
echo "1024 rc=$?"
grep -E "^\| [a-z]|interleaved overhead|winner" "$out/il_1024.log" | awk -F'|' 'NF>3 {print $2, $3, $5, $10, $11; next} {print}'
