#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, the issue-2 attention shapes with --check, and PyTorch's SDPA on
# the same shapes. Expects the stripped library and binaries in ./carry (see README "GPU tests").
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry:${LD_LIBRARY_PATH:-}
export TILEJIT_CACHE_DIR=${TILEJIT_CACHE_DIR:-/tmp/tilejit-cache}
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
carry/example_01_vector_add
timeout 300 carry/tilejit_gpu_tests ${GPU_TEST_FILTER:-} 2>&1 | tee "$out/gpu_tests.log" | tail -40
echo "== attention checks"
mkdir -p carry/tools && ln -sf ../tilejit carry/tools/tilejit
bash bench/attention.sh carry 2>&1 | tee "$out/attention.log"
