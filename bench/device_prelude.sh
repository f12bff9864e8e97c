# Sourced by the device scripts (bench/*_run.sh): the environment for ./carry, the output folder $out
# ($OUT on the device machine), and run_gpu_tests.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/carry PYTHONUNBUFFERED=1
export TILEJIT_CACHE_DIR=${TILEJIT_CACHE_DIR:-/tmp/tj-$(basename "$0" .sh)-$$}
out=${OUT:-/tmp/out}
mkdir -p "$out"

# Every GPU test case (log in $out/gpu_tests.log); prints the exit status, failures and the summary.
run_gpu_tests() {
  timeout "${1:-300}" carry/tilejit_gpu_tests > "$out/gpu_tests.log" 2>&1
  echo "gpu tests rc=$?"
  grep -E "FAILED|with expansion" -A3 "$out/gpu_tests.log" | head -20
  tail -2 "$out/gpu_tests.log"
}
