#!/usr/bin/env bash
# Nsight Compute on the flex kernel at seqlen 1024, none vs alibi (the winners of a warm autotune cache):
# warp stall reasons, issue statistics and per-SASS-instruction counters, to place ALiBi's cost at seqlen
# 1024. Expects ./carry.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_CACHE_DIR=/tmp/tj-ncu
for m in none alibi; do
  python3 bench/flex_profile_driver.py --lib carry/libtilejit.so.0 --mod $m > "$out/warm_$m.log" 2>&1
  echo "warm $m rc=$?"
  timeout 200 ncu --clock-control none -k regex:flex_attention_fwd --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section LaunchStats --section Occupancy --section SourceCounters --section ComputeWorkloadAnalysis \
    --import-source no -o "$out/rep_$m" \
    python3 bench/flex_profile_driver.py --lib carry/libtilejit.so.0 --mod $m --calls 1 > "$out/ncu_$m.log" 2>&1
  echo "ncu $m rc=$?"; tail -3 "$out/ncu_$m.log"
  ncu -i "$out/rep_$m.ncu-rep" --page details --csv > "$out/details_$m.csv" 2>&1
  ncu -i "$out/rep_$m.ncu-rep" --page source --csv --print-source sass > "$out/source_$m.csv" 2>&1
  echo "source lines $(wc -l < "$out/source_$m.csv")"
done
grep -E "Duration|Executed Ipc Active|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Executed Instructions\"" "$out"/details_*.csv | cut -c1-220
python3 bench/ncu_source_diff.py "$out/source_none.csv" "$out/source_alibi.csv" | head -30
