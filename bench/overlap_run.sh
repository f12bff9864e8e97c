#!/usr/bin/env bash
# Eighth session, first device call: FlashAttention-3's in-warpgroup overlap (deferred wgmma waits, the flex
# kernel's dense loop reordered; experimental knob TJX_OVERLAP=1). Every GPU test with the knob off, the flex
# GPU tests with it on, then at seqlen 1024 none/alibi/softcap autotuned, alternating off (0) and on (1),
# each run in a fresh process and cache directory. The knob lived only in the build that ran (commit 6b1f964);
# results: bench/results/2026-11-30-issue4-eighth-session-h200.md.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
TJX_OVERLAP=1 TILEJIT_CACHE_DIR=/tmp/tj-ov-tests timeout 150 carry/tilejit_gpu_tests "[flex]" > "$out/gpu_flex_overlap.log" 2>&1
echo "flex gpu tests with overlap rc=$?"; grep -E "FAILED" -A5 "$out/gpu_flex_overlap.log" | head -20; tail -2 "$out/gpu_flex_overlap.log"
i=0
for v in 0 1 1 0; do
  i=$((i + 1))
  TJX_OVERLAP=$v TILEJIT_CACHE_DIR=/tmp/tj-ov-$i timeout 75 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi,softcap50 --seqlens 1024 --out "$out/ov_$i.md" > "$out/ov_$i.log" 2> "$out/ov_$i.err"
  echo "== $i overlap=$v rc=$?"
  grep -E "^\| [a-z]" "$out/ov_$i.md" | awk -F'|' '{print $2, $3, $5, $10}'
  awk '/tilejit autotune/ {print substr($0, 1, 60)} / ok$/ {print "   ", $0}' "$out/ov_$i.err" | sort -s -k5,5n | head -12
done
cat "$out"/ov_*.err > "$out/ov_all.err"; cat "$out"/ov_*.log > "$out/ov_all.log"; rm -f "$out"/ov_[0-9].err "$out"/ov_[0-9].log
