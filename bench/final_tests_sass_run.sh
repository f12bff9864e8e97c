#!/usr/bin/env bash
# Eighth session, last device call: every GPU test at the final commit, and the SASS of the ALiBi kernels of
# call 3 (carry/sass/x_{full,noif,nofma,none}.ptx: full ALiBi, no crossing-block branch, only the branch,
# neither) for reading where the branch's cost comes from.
source "$(dirname "$0")/device_prelude.sh"
gpu_header_and_tests 200
for f in carry/sass/*.ptx; do
  n=$(basename "$f" .ptx)
  ptxas -arch=sm_90a -o /tmp/$n.cubin "$f" && cuobjdump -sass /tmp/$n.cubin > "$out/$n.sass"
  echo "$n: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$out/$n.sass") SASS instructions, BSSY $(grep -c BSSY "$out/$n.sass"), BSYNC $(grep -c BSYNC "$out/$n.sass"), DEPBAR $(grep -c 'WARPGROUP.DEPBAR' "$out/$n.sass")"
done
