#!/usr/bin/env bash
# tilejit's flex attention with each built-in mod through the CLI (median of launches, --check against
# float64 on sampled rows), then FlexAttention with the same mods (bench/flex_peers.py). bf16, d=128, h=16,
# 16384 tokens. `--gqa-kv-heads 16` with 16 query heads is plain attention through the flex kernel (the
# "no mod" baseline of the same kernel).
set -uo pipefail
bin=${1:-build}/tools/tilejit
for s in 4096 16384; do
  b=$((16384 / s))
  common=(attention --backend gpu --check --check-rows 16 --batch $b --heads 16 --seqlen-q $s --head-dim 128 --iters 10)
  echo "== s=$s none";             $bin "${common[@]}" --gqa-kv-heads 16 | grep -E "time|check"
  echo "== s=$s alibi";            $bin "${common[@]}" --alibi | grep -E "time|check"
  echo "== s=$s softcap50";        $bin "${common[@]}" --softcap 50 | grep -E "time|check"
  echo "== s=$s causal";           $bin "${common[@]}" --causal --gqa-kv-heads 16 | grep -E "time|check"
  echo "== s=$s causal-window256"; $bin "${common[@]}" --causal --window-left 256 | grep -E "time|check"
done
python3 "$(dirname "$0")/flex_peers.py"
