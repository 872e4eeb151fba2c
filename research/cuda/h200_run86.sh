#!/bin/bash
# Twenty-second session: target 5 (depth) with the f16 KV cache on the shipped H200 defaults.
# Run 84 (f32 cache, BF16 bs=1): depth 128 224.8, depth 8,192 195.5 tok/s (-13.0%). At depth
# 8,192 the f32 cache is 2.15 GB a step; f16 halves it to 1.07 GB.
# Prediction: BF16 depth 8,192 at about 208 tok/s with f16 (-7%), depth 128 unchanged within 1%;
# Q8_0 depth 8,192 -8% (run 45's figure: -7.8%).
# Also the CUDA lane tiny with the f16 cache (Level A gates green; backend-parity may be red by
# the format, as in run 28).
# Usage: h200_run86.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for d in bf16 q8_0; do
  step "decode $d, bs 1, depth 128/8192, kv f16"
  timeout 150 $B --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:$d --batch 1 \
    --depth 128,8192 --new-tokens 128 --reps 5 --out "$O/board.jsonl" 2>&1 \
    | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
step "CUDA lane tiny, kv f16"
timeout 90 $B --kv-cache-dtype f16 gate --lane cuda --only tiny > "$O/gates-tiny.txt" 2>&1
grep -E "gates run|RED" "$O/gates-tiny.txt" | head -5 | cut -c1-200 | tee -a "$L"
step done
