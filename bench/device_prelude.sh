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

# The GPU's name, driver and clock, then every GPU test case (run_gpu_tests SECONDS).
gpu_header_and_tests() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  run_gpu_tests "${1:-200}"
}

# flex_side_by_side.py autotuned over every mod and protocol seqlen (flex_table SECONDS [LIB]); table and
# logs in $out/flex_autotuned.*; prints the exit status and a summary of each row.
flex_table() {
  timeout "${1:-240}" python3 bench/flex_side_by_side.py --lib "${2:-carry/libtilejit.so.0}" --autotune \
    --out "$out/flex_autotuned.md" > "$out/flex_autotuned.log" 2> "$out/flex_autotuned.err"
  echo "flex rc=$?"
  grep -E "^\| [a-z]" "$out/flex_autotuned.md" | awk -F'|' '{print $2, $3, $5, $8, $9, $10}'
}

# flex_side_by_side.py autotuned at seqlen 1024 in a fresh autotune cache (flex_1024 NAME MODS LIB [SECONDS]);
# table in $out/NAME.md; prints the exit status, mod/seqlen/ms/overhead of each row and the tuner's winners.
flex_1024() {
  TILEJIT_CACHE_DIR=/tmp/tj-$1 timeout "${4:-80}" python3 bench/flex_side_by_side.py --lib "$3" --autotune \
    --mods "$2" --seqlens 1024 --out "$out/$1.md" > /dev/null 2> "$out/$1.err"
  echo "== $1 rc=$?"
  grep -E "^\| [a-z]" "$out/$1.md" | awk -F'|' '{print $2, $3, $5, $10}'
  grep -E "winner" "$out/$1.err"
  rm -f "$out/$1.err"
}
