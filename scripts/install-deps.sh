#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages needed to build and test tilejit; only missing ones are installed.
# Used by scripts/test.sh, scripts/demo.sh and .ci/run. Needs root (or sudo) when something is missing.
set -euo pipefail

packages=(cmake ninja-build g++ llvm-19-dev libzstd-dev libfmt-dev catch2 libcli11-dev libxxhash-dev llvm-19-tools
          llvm-19-runtime)  # lli-19: the CPU simulator of generated IR (tests/sim_lli.h)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
