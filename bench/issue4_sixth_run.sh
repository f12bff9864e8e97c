#!/usr/bin/env bash
# Device call of the sixth session: every GPU test; flex attention's mods beside FlexAttention (autotuned,
# issue 4), after ALiBi's distance became index_to_f32 (one FADD of an immediate per score, no per-column
# conversion); then none and alibi at seqlen 1024 twice more, each in a fresh process and cache, since that
# ratio sits nearest the bar. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
flex_table 240
for rep in 1 2; do
  TILEJIT_CACHE_DIR=/tmp/tj-rep$rep timeout 100 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 \
    --autotune --mods none,alibi --seqlens 1024 --out "$out/flex_1024_rep$rep.md" > "$out/flex_1024_rep$rep.log" \
    2> "$out/flex_1024_rep$rep.err"; echo "repeat $rep rc=$?"
  grep -E "^\| [a-z]" "$out/flex_1024_rep$rep.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
done
