#!/usr/bin/env bash
# Seventh session, first device call: every GPU test (fma_index's new case among them), then at seqlen 1024
# none and alibi in fresh processes, alternating the build with ALiBi through fma_index (S:
# carry/libtilejit.so.0) and the sixth session's final build (C: carry/ab/libC.so.0).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 240
i=0
for v in C S S C; do
  i=$((i + 1))
  lib=carry/libtilejit.so.0; [ $v = C ] && lib=carry/ab/libC.so.0
  TILEJIT_CACHE_DIR=/tmp/tj-split-$i timeout 80 python3 bench/flex_side_by_side.py --lib $lib --autotune \
    --mods none,alibi --seqlens 1024 --out "$out/ab_$i$v.md" > "$out/ab_$i$v.log" 2> "$out/ab_$i$v.err"
  echo "== $i $v rc=$?"
  grep -E "^\| [a-z]" "$out/ab_$i$v.md" | awk -F'|' '{print $2, $3, $5, $10}'
done
