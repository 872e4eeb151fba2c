#!/bin/bash
# Prepared in the twenty-second session (not run): why `bench serve` at c = 64 gave fewer tok/s
# than c = 32 (run 84: 2,258 against 3,227; ITL p50 24.1 ms against 6.6). Steps of more than
# cuda_graph_max_batch = 32 rows run without CUDA graphs, and 33-63 rows take other linear forms
# than 9-32 (the split-K wgmma form) or 64+ (QTC_GEMM_MIN = 64: the wgmma GEMM).
# 1. Engine decode, BF16, depth 128, 128 new tokens, bs = 32, 48, 64 with graphs up to 32 rows
#    (the default) and up to 64 (N = 3): which part is the graphs and which the linear forms.
# 2. `bench serve` c = 64 with cuda_graph_max_batch 32 and 64 (N = 3).
# Prediction: bs=64 un-graphed about 2x the bs=32 step (13 ms, 4,900 tok/s); if decode bs=64
# is near 4,900 but serve c=64 is 2,258, the loss is in the server's scheduling (prefill mixed
# into decode steps, or preemption), not in the step.
# Usage: h200_run91.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for g in 32 64; do
  step "decode bf16 bs 32/48/64, cuda_graph_max_batch $g"
  timeout 150 $B --backend cuda --cuda-graph-max-batch $g bench decode --model synth:llama-3.1-8b:bf16 --batch 32,48,64 \
    --depth 128 --new-tokens 128 --reps 3 --out "$O/graphs.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/g$g /" \
    | cut -c1-160 | tee -a "$L"
done
for g in 32 64; do
  step "serve bf16 c = 64, cuda_graph_max_batch $g"
  timeout 150 $B --backend cuda --cuda-graph-max-batch $g bench serve --model synth:llama-3.1-8b:bf16 --concurrency 64 \
    --input-len 128 --new-tokens 128 --reps 3 --out "$O/graphs.jsonl" 2>&1 | grep -E "^serve|rror" | sed "s/^/g$g /" \
    | cut -c1-200 | tee -a "$L"
done
step done
