#!/usr/bin/env bash
# Eighth session, third device call: where ALiBi's cost at seqlen 1024 comes from. The alibi kernel with parts
# removed by an experimental knob (TJX_ALIBI_EXP; the results are wrong except for "full", only their times
# count): full, noif (no crossing-block correction), nofma (no fma_index), none (neither), rowonly (the
# crossing correction and a per-row fma_index without a per-element part). Each in a fresh process. The knob
# lived only in the build that ran; results: bench/results/2026-11-30-issue4-eighth-session-h200.md.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
i=0
for x in none-mod full noif nofma none rowonly full; do
  i=$((i + 1))
  mods=alibi; [ $x = none-mod ] && mods=none
  TJX_ALIBI_EXP=$x TILEJIT_CACHE_DIR=/tmp/tj-dx-$i timeout 60 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods $mods --seqlens 1024 --out "$out/dx_$i.md" > "$out/dx_$i.log" 2> "$out/dx_$i.err"
  echo "== $i $x rc=$? $(grep -E '^\| [a-z]' "$out/dx_$i.md" | awk -F'|' '{print $2, $3, $5}') $(grep -oE 'winner: .*\(' "$out/dx_$i.err" | head -1)"
done
cat "$out"/dx_[0-9].err > "$out/dx_all.err"; rm -f "$out"/dx_[0-9].err "$out"/dx_[0-9].log
