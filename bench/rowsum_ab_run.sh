#!/usr/bin/env bash
# For the branch next/rowsum-after-pv (l_i updated after p·v's wgmma issue): every GPU test with this build,
# then at seqlen 1024 none/alibi/softcap50 alternating main's build (M: carry/ab/libM.so.0) and this one (R:
# carry/libtilejit.so.0), each in its own process and autotune cache. Build both here first and carry them
# (strip -o carry/... build/libtilejit.so.0; two libraries fit the 64 MiB carry limit).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
i=0
for v in M R R M R M; do
  i=$((i + 1))
  lib=carry/libtilejit.so.0; [ $v = M ] && lib=carry/ab/libM.so.0
  TILEJIT_CACHE_DIR=/tmp/tj-rs-$i timeout 80 python3 bench/flex_side_by_side.py --lib $lib --autotune \
    --mods none,alibi,softcap50 --seqlens 1024 --out "$out/rs_$i$v.md" > /dev/null 2> "$out/rs_$i$v.err"
  echo "== $i $v rc=$?"
  grep -E "^\| [a-z]" "$out/rs_$i$v.md" | awk -F'|' '{print $2, $3, $5, $10}'
  grep -E "winner" "$out/rs_$i$v.err"; rm -f "$out/rs_$i$v.err"
done
