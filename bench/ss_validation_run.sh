#!/usr/bin/env bash
# Device check for the EXPERIMENTAL shared-memory-A wgmma path (CodegenOptions::wgmma_smem_a,
# TILEJIT_WGMMA_SMEM_A=1; off by default until this passes on a GPU): CLI --check runs with it on, A/B
# timings on/off, then every GPU test with it on; SS_FULL=1 adds the full side-by-side and flex tables with it
# on. Expects ./carry (libtilejit.so.0, tilejit, tilejit_gpu_tests).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry TILEJIT_CACHE_DIR=/tmp/tj-ss TILEJIT_WGMMA_SMEM_A=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
T=carry/tilejit
chk() { $T attention --backend gpu --check --check-rows 32 --iters 3 "$@" 2>&1 | grep -E "check" | sed "s|^|$* :|"; }
chk --batch 2 --heads 4 --seqlen-q 1000 --head-dim 64
chk --batch 2 --heads 4 --seqlen-q 777 --head-dim 128 --causal --block-m 128 --block-n 128 --num-warps 8
chk --batch 2 --heads 4 --seqlen-q 513 --head-dim 64 --block-m 128 --block-n 64 --num-warps 8 --num-stages 3
chk --batch 2 --heads 4 --seqlen-q 300 --head-dim 128 --num-stages 1
chk --batch 2 --heads 4 --seqlen-q 600 --head-dim 128 --window-left 100 --window-right 0 --softcap 30
chk --batch 2 --heads 6 --seqlen-q 400 --head-dim 64 --alibi --gqa-kv-heads 2 --block-m 128 --block-n 64 --num-warps 8
tm() { for ss in 1 0; do echo "smem_a=$ss $* : $(TILEJIT_WGMMA_SMEM_A=$ss $T attention --backend gpu --iters 20 "$@" 2>&1 | grep -E 'time' | head -1)"; done; }
tm --batch 4 --heads 16 --seqlen-q 4096 --head-dim 128 --block-m 128 --block-n 128 --num-warps 8
tm --batch 16 --heads 16 --seqlen-q 1024 --head-dim 128 --causal --block-m 128 --block-n 128 --num-warps 8
tm --batch 8 --heads 32 --seqlen-q 2048 --head-dim 64 --causal --block-m 64 --block-n 64 --num-warps 4
timeout ${GPU_TESTS_TIMEOUT:-200} carry/tilejit_gpu_tests > "$out/gpu_tests_smem_a.log" 2>&1; tests_rc=$?
echo "gpu tests rc=$tests_rc"
grep -E "FAILED" -A4 "$out/gpu_tests_smem_a.log" | head -12; tail -3 "$out/gpu_tests_smem_a.log"
# When the above passes: the full protocol and the flex mods with the shared-memory A path on (the
# environment reaches the library loaded by the Python scripts), to decide whether it becomes the default.
if [ "${SS_FULL:-0}" = 1 ] && [ "$tests_rc" = 0 ]; then
  timeout 250 python3 bench/side_by_side.py --lib carry/libtilejit.so.0 --skip compile \
    --out "$out/side_by_side_smem_a.md" > "$out/side_by_side_smem_a.log" 2>&1; echo "side_by_side rc=$?"
  timeout 100 python3 bench/flex_side_by_side.py --lib carry/libtilejit.so.0 --block-m 64 --block-n 64 \
    --num-warps 4 --num-stages 2 --out "$out/flex_smem_a.md" > "$out/flex_smem_a.log" 2>&1; echo "flex rc=$?"
fi
