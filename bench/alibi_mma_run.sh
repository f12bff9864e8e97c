#!/usr/bin/env bash
# Eighth session, second device call: every GPU test (the chained wgmma dot's new case among them), the flex
# GPU tests with ALiBi through the tensor cores (experimental knob TJX_ALIBI_TC=1), then at seqlen 1024 none
# and alibi autotuned, alternating the FFMA form (0) and the tensor-core form (1), each run in a fresh process
# and cache directory. The knob lived only in the build that ran (commit f258d19); results:
# bench/results/2026-11-30-issue4-eighth-session-h200.md.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
TJX_ALIBI_TC=1 TILEJIT_CACHE_DIR=/tmp/tj-tc-tests timeout 150 carry/tilejit_gpu_tests "[flex]" > "$out/gpu_flex_tc.log" 2>&1
echo "flex gpu tests with TJX_ALIBI_TC=1 rc=$?"; grep -E "FAILED" -A5 "$out/gpu_flex_tc.log" | head -20; tail -2 "$out/gpu_flex_tc.log"
i=0
for v in 0 1 1 0; do
  i=$((i + 1))
  TJX_ALIBI_TC=$v TILEJIT_CACHE_DIR=/tmp/tj-tc-$i timeout 75 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi --seqlens 1024 --out "$out/tc_$i.md" > "$out/tc_$i.log" 2> "$out/tc_$i.err"
  echo "== $i alibi_tc=$v rc=$?"
  grep -E "^\| [a-z]" "$out/tc_$i.md" | awk -F'|' '{print $2, $3, $4, $5, $10}'
  grep -E "winner" "$out/tc_$i.err"
done
cat "$out"/tc_[0-9].err > "$out/tc_all.err"; rm -f "$out"/tc_[0-9].err "$out"/tc_[0-9].log
