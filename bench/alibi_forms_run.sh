#!/usr/bin/env bash
# Seventh session, A/B of ALiBi forms at seqlen 1024 (none and alibi in each fresh process, autotuned),
# chosen by the temporary TJX_ALIBI knob of an uncommitted experimental build (its S path is commit 7c1be2b,
# PTX identical): S = fma_index with an if_ correcting blocks that
# cross the diagonal; L = three loops (below / crossing / above the diagonal), no if_; C = the sixth
# session's |d| form. T = S with TJX_TREE=1 (pairwise in-thread reductions). Markdown tables only in $out.
source "$(dirname "$0")/device_prelude.sh"
export TILEJIT_PRINT_AUTOTUNING=1
i=0
for v in S L C T S L C T; do
  i=$((i + 1))
  form=$v; tree=0; [ $v = T ] && form=S && tree=1
  TJX_ALIBI=$form TJX_TREE=$tree TILEJIT_CACHE_DIR=/tmp/tj-forms-$i timeout 70 python3 bench/flex_side_by_side.py \
    --lib carry/libtilejit.so.0 --autotune --mods none,alibi --seqlens 1024 --out "$out/f_$i$v.md" \
    > /tmp/f_$i$v.log 2> /tmp/f_$i$v.err
  echo "== $i $v rc=$? $(grep -h winner /tmp/f_$i$v.err | cut -c1-80 | tr '\n' ' ')"
  grep -E "^\| [a-z]" "$out/f_$i$v.md" | awk -F'|' '{print $2, $3, $4, $5, $10}'
done
