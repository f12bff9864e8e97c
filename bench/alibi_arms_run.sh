#!/usr/bin/env bash
# Ninth session, experiment (knob TJX_ALIBI_ARMS lives only in the build that ran, commit named in
# bench/results/2026-11-30-issue4-ninth-session-h200.md): ALiBi's crossing-block test moved from inside the mods
# to an if/else around mods+softmax, so each arm is straight-line code. Flex GPU tests with the knob, then
# none/alibi at 1024 alternating base (B) and arms (A), each in its own process and autotune cache.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
TJX_ALIBI_ARMS=1 timeout 150 carry/tilejit_gpu_tests "[flex]" > "$out/gpu_flex_arms.log" 2>&1
echo "flex gpu tests (arms) rc=$?"; tail -2 "$out/gpu_flex_arms.log"
i=0
for v in B A A B B A; do
  i=$((i + 1))
  if [ $v = A ]; then export TJX_ALIBI_ARMS=1; else unset TJX_ALIBI_ARMS; fi
  flex_1024 arms_$i$v none,alibi carry/libtilejit.so.0 70
done
