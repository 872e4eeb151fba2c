#!/bin/bash
# Run 146 (forty-second session): TCK_CLUSTER's SwiGLU mode rebuilt. Run 145's profile (H100)
# had the cluster gate+up with SwiGLU at 102.4 us a launch against 90.8 + 8.5 (form + reduce)
# shipped: its gate|up pair walk (a warpgroup both halves of a pair) left 7 pairs a run for 3
# warpgroups (3 / 2 / 2 pairs: 6 / 4 / 4 row groups against 5 / 5 / 4). Now the walk is the
# plain one, and the pair's gate and up sums (each reduced with its bias by its cluster) meet in
# the split-K scratch through a counter, the second storing swiglu1(gate, up).
# 1. Green (self-check f32 / f16: linear_gated_bf16 mode 2 at M = 9..130, bit-equal; lanes).
# 2. Decode bs=32, f16 cache, depth 128, 128 new tokens, N = 3: ship / clu / clu / ship.
#    Prediction: clu +1.5 to +3% (gate+up about 96-97 us as mode 1's table row, the lm-head
#    -18 us a step).
# Usage: h200_run146.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-330}
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
mk clu TCK_CLUSTER=1
if ! green clu; then
  step "cluster not green: no timing"
  grep -E "FAIL|linear_gated|rror" "$O"/sc-*.txt | cut -c1-300 | head -8 | tee -a "$L"
  exit 0
fi
grep -E "linear_gated" "$O"/sc-*.txt | cut -c1-220 | tee -a "$L"
for c in ship clu clu ship; do
  left $((B - 50)) "decode $c" || break
  step "decode bs=32, $c"
  timeout 70 $N --backend cuda --kv-cache-dtype f16 --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 32 --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" \
    | cut -c1-160 | tee -a "$L"
done
step done; exit 0
