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
  flex_1024 rs_$i$v none,alibi,softcap50 $lib 80
done
