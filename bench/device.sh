#!/usr/bin/env bash
# tilejit's GPU tests and benchmark suites on a GPU machine that has no build toolchain (no LLVM): the
# library, the GPU test binary and the user-mods example library are built on a CPU machine and travel in
# ./carry/.
#
#   bench/device.sh --prepare                    # CPU machine, repo root: build, strip into ./carry/
#   bench/device.sh [--skip-tests] SUITE...      # GPU machine, repo root: GPU tests, then the suites
#
# Results go to $OUT (default bench/results), flat: <suite>.md and <suite>.png per suite, device.log (the
# environment, the GPU tests' summary, every suite's output), and gpu_tests.log only when a test failed.
# Run at most three suites per call so that no more than eight files come back.
# Time: the whole call stops starting work after DEVICE_BUDGET_S seconds (default 540): each suite gets
# the time left as a soft budget (bench.py --budget-s: rows not started by then are listed as skipped)
# and a hard timeout a little later. --skip-tests leaves out the GPU tests (about two minutes) when an
# earlier call already ran them on the same build. BENCH_ARGS adds options to every bench.py call (e.g.
# BENCH_ARGS="--seqlens 16384" for one part of a suite; --smoke checks this script without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."

prepare() {
  local build=${BUILD_DIR:-build}
  if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release || return 1
  fi
  cmake --build "$build" --target tilejit tilejit_gpu_tests tilejit_user_mods || return 1
  rm -rf carry && mkdir -p carry
  strip -o carry/libtilejit.so.0 "$build/libtilejit.so.0" &&
    strip -o carry/tilejit_gpu_tests "$build/tests/tilejit_gpu_tests" &&
    strip -o carry/libtilejit_user_mods.so "$build/examples/user_mods/libtilejit_user_mods.so" || return 1
  local dirty=no
  [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && dirty=yes
  printf 'commit=%s\ndirty=%s\nbuilt=%s\n' "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" "$dirty" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > carry/BUILD_INFO
  local bytes
  bytes=$(du -sb carry | cut -f1)
  ls -l carry
  if [ "$bytes" -gt $((64 * 1024 * 1024)) ]; then
    echo "carry/ holds $bytes bytes, over the device machine's 64 MiB limit" >&2
    return 1
  fi
  echo "carry/ ready ($((bytes / 1024 / 1024)) MiB, commit $(sed -n 's/^commit=//p' carry/BUILD_INFO), uncommitted changes: $dirty)"
}

if [ "${1:-}" = --prepare ]; then
  prepare
  exit $?
fi

run_tests=1
if [ "${1:-}" = --skip-tests ]; then
  run_tests=0
  shift
fi
if [ $# -eq 0 ]; then
  echo "usage: bench/device.sh --prepare | bench/device.sh [--skip-tests] SUITE...   (suites: python3 bench/bench.py --list)" >&2
  exit 2
fi
for f in carry/libtilejit.so.0 carry/tilejit_gpu_tests carry/libtilejit_user_mods.so; do
  [ -f "$f" ] || { echo "$f is missing: run bench/device.sh --prepare on the build machine first" >&2; exit 2; }
done

out=${OUT:-bench/results}
mkdir -p "$out"
log=$out/device.log
: > "$log"
export LD_LIBRARY_PATH=$PWD/carry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONUNBUFFERED=1
export TILEJIT_CACHE_DIR=${TILEJIT_CACHE_DIR:-/tmp/tilejit-bench-cache}
budget=${DEVICE_BUDGET_S:-540}
start=$SECONDS
say() { echo "$*" | tee -a "$log"; }

say "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"
say "== build: $(tr '\n' ' ' < carry/BUILD_INFO 2>/dev/null)"
status=0

if [ $run_tests = 1 ]; then
  tests_log=$(mktemp)
  timeout "${GPU_TESTS_TIMEOUT_S:-300}" carry/tilejit_gpu_tests > "$tests_log" 2>&1
  rc=$?
  say "== GPU tests (tilejit_gpu_tests, the ctest label gpu): rc=$rc, $((SECONDS - start)) s"
  tail -3 "$tests_log" | tee -a "$log"
  if [ $rc != 0 ]; then
    status=1
    grep -E "FAILED|with expansion|Timeout|signal" -A4 "$tests_log" | head -40 | tee -a "$log"
    cp "$tests_log" "$out/gpu_tests.log"
  fi
  rm -f "$tests_log"
fi

for suite in "$@"; do
  left=$((budget - (SECONDS - start)))
  if [ $left -lt 60 ]; then
    say "== $suite: not run, $left s of the ${budget} s budget left"
    status=1
    continue
  fi
  say "== $suite (soft budget $((left - 45)) s, hard limit $left s)"
  rm -f "$out/$suite.md" "$out/$suite.png"  # never show an earlier run's table as this one's
  timeout "$left" python3 bench/bench.py --lib carry/libtilejit.so.0 --user-mods carry/libtilejit_user_mods.so \
    --results "$out" --budget-s $((left - 45)) ${BENCH_ARGS:-} "$suite" >> "$log" 2>&1
  rc=$?
  say "== $suite: rc=$rc after $((SECONDS - start)) s"
  [ $rc = 0 ] || status=1
  # The tables, for the caller's screen (the full report is $out/$suite.md).
  [ -f "$out/$suite.md" ] && grep -E "^\| " "$out/$suite.md" | cut -c1-220
done
say "== done in $((SECONDS - start)) s, status $status"
exit $status
