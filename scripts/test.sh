#!/usr/bin/env bash
# Builds tilejit and runs its tests, then installs it to a temporary prefix and builds and runs
# examples/host_app against the installed package (find_package(tilejit)) on the CPU interpreter.
# GPU tests (ctest label `gpu`) run only when an NVIDIA GPU is present.
# Environment: BUILD_DIR (default <repo>/build), JOBS (default: number of CPUs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

"$root/scripts/install-deps.sh"
export PATH="$PATH:/usr/local/cuda/bin"  # ptxas, used by the PTX tests

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"

if nvidia-smi -L >/dev/null 2>&1; then
  echo "test: a GPU is present; running every test, the gpu label included"
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
else
  echo "test: no GPU; running the CPU tests (ctest -LE gpu)"
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gpu
fi

# The installed package must be usable on its own.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$root/examples/host_app" -B "$scratch/host_app" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix"
cmake --build "$scratch/host_app" -j "$jobs"
TILEJIT_INTERPRET=1 TILEJIT_CACHE_DIR="$scratch/cache" "$scratch/host_app/host_app"
TILEJIT_INTERPRET=1 TILEJIT_CACHE_DIR="$scratch/cache" "$scratch/host_app/gemma2_variant"
echo "test: all passed"
