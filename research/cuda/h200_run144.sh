#!/bin/bash
# Run 144 (forty-second session): TCK_CLUSTER, the split-K reduce through a thread-block cluster
# (kernels/linear_tck.cu): the 4-slice matrices (gate+up with SwiGLU, the lm-head) at bs=32 with
# no partials in global memory and no reduce launch. Any card (H100: the H200 file passed).
# 1. Green: self-check (f16 and f32 cache; linear_gated_bf16 runs the SwiGLU mode at M = 9..130
#    and the two-output mode unfused; linear_qkv_rope the 16-slice Q|K|V with TCK_CL_MAX = 16)
#    and the CUDA lanes tiny / qwen3, with TCK_CLUSTER = 1 (and TCK_CL_MAX = 16: clusters of
#    16, non-portable, for qkv and down).
# 2. Kernel table, BF16, M = 32 (and 16): gate+up, lm-head; ship / cluster / cluster with 4-unit
#    rings of 2-unit batches / the plain form with the cluster's 6-unit rings (the ring's share).
#    Prediction: gate+up 90.8 + 8.5 (reduce) us on an H100 -> 88-92 us with the cluster (the
#    partials' 14.7 MB of writes and the reduce gone, the rings' 25% fewer bytes in flight
#    costing up to a few %); lm-head 375 + 26.5 -> 375-385.
# 3. Decode bs=32, f16 cache, depth 128, 128 new tokens, N = 3: ship / cluster / cluster / ship.
#    Prediction: +2.5 to +4% (run 142: gate+up's SwiGLU reduce 3.4% and the lm-head's 0.3% of
#    the step).
# Usage: h200_run144.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-560}
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
mk clu TCK_CLUSTER=1
mk clu16 TCK_CLUSTER=1 TCK_CL_MAX=16
# clu16 runs every path clu does (4-slice clusters) and the 16-slice ones (qkv: the Q|K|V
# check's unfused pass; down): green with it covers both; else try clu alone.
if green clu16; then
  C="clu clu16"
elif green clu; then
  C="clu"
else
  step "cluster not green: no timing"
  grep -E "FAIL|linear_gated|rror" "$O"/sc-*.txt | cut -c1-300 | head -8 | tee -a "$L"
  exit 0
fi
grep -E "linear_gated|linear_qkv" "$O"/sc-*.txt | cut -c1-220 | tee -a "$L"
step "kernel table, BF16, M = 16 / 32: ship / clu / clu16 / clu s4u2 / plain s6u3"
timeout 100 $N probe --bench-kernels --kernel-tokens 16,32 --kernel-dtypes bf16 --kernel-shapes qkv,gate+up,down,lm-head \
  --variants ";TCK_CLUSTER=1;TCK_CLUSTER=1,TCK_CL_MAX=16;TCK_CLUSTER=1,TCK_CL_STAGES=4,TCK_CL_UB=2;TCK_STAGES=6,TCK_UB=3" \
  > "$O/kbench32.txt" 2>&1
grep -E "^linear |rror" "$O/kbench32.txt" | cut -c1-110 | tee -a "$L"
for c in ship $C $(echo $C | tr ' ' '\n' | tac | tr '\n' ' ') ship; do
  left $((B - 60)) "decode $c" || break
  step "decode bs=32, $c"
  timeout 90 $N --backend cuda --kv-cache-dtype f16 --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 32 --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" \
    | cut -c1-160 | tee -a "$L"
done
step done; exit 0
