#!/usr/bin/env bash
# Builds the tilejit CLI and runs the attention kernel on a small shape, checked against a float64
# reference: on the GPU when one is present, otherwise on the CPU interpreter.
# Environment: BUILD_DIR (default <repo>/build), JOBS (default: number of CPUs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs" --target tilejit_cli

# The same test the library makes (gpu_available): a loadable driver that lists a device.
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && nvidia-smi -L >/dev/null 2>&1; then
  backend=gpu
  shape=(--batch 2 --heads 8 --seqlen-q 1024 --head-dim 64)
else
  backend=interp
  shape=(--batch 1 --heads 2 --seqlen-q 128 --head-dim 64)
fi
echo "demo: running attention on backend '$backend'"
set -x
"$build/tools/tilejit" attention "${shape[@]}" --backend "$backend" --check
