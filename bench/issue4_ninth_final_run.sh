#!/usr/bin/env bash
# Ninth session, third device call: every GPU test; at seqlen 1024 none and alibi twice (ALiBi as an if/else
# around mods+softmax, row sum after p·v); then the full flex table, autotuned, side by side with
# FlexAttention (bench/results/2026-11-30-issue4-ninth-session-h200.md names the commit).
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
gpu_header_and_tests 200
for i in 1 2; do flex_1024 fin_$i none,alibi carry/libtilejit.so.0 70; done
flex_table 270
