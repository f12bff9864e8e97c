#!/usr/bin/env bash
# Device call of the fifth session: every GPU test; flex attention's mods beside FlexAttention (autotuned, issue 4);
# the attention side-by-side at seqlens 1024/4096 (--quick), since exp2 became ex2.approx.ftz and the epilogue
# one division per row in every attention kernel. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
flex_table 230
timeout 150 python3 bench/side_by_side.py --lib carry/libtilejit.so.0 --quick --skip compile \
  --out "$out/side_by_side.md" > "$out/side_by_side.log" 2> "$out/side_by_side.err"; echo "side_by_side rc=$?"
grep -E "^\| (d(64|128)|matmul|bf16)" "$out/side_by_side.md" | awk -F'|' '{print $2, $4, $5, $9}' | head -20
