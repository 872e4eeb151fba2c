#!/bin/bash
# Run 142 (forty-first session): where a bs=32 decode step's GPU time goes (target 3: 5,159 tok/s
# on the H200 board against >= 5,485). Shipped defaults, f16 KV cache, BF16 Llama-3.1-8B shape.
# 1. decode bs=32, depth 128, 128 new tokens, N = 3: the step's wall time (the reference that the
#    kernels' sum is compared with; the difference is launch gaps and host time).
# 2. ncu_step.sh at bs=32 (durations only, clocks left alone): the per-kernel sum a step.
# Prediction: linear kernels 70-75% of the step, attention 8-12%, the split-K reduces 5-8%,
#   the rest (norms, rope, swiglu, sampling) under 10%; kernels' sum within 5% of the wall step.
# Usage: h200_run142.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
step "decode bs=32, ship"
timeout 90 $N --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-160 | tee -a "$L"
left $((B - 120)) "ncu step" || exit 0
step "ncu step bs=32"
mkdir -p "$O/ncu"
BATCH=32 GLOBAL="--kv-cache-dtype f16" timeout $((B - 60 - $(date +%s) + t0)) bash "$D/ncu_step.sh" "$N" "$O/ncu" \
  synth:llama-3.1-8b:bf16 8000 1600 2>&1 | tee -a "$L"
tail -5 "$O/ncu/ncu.err" | cut -c1-200 | tee -a "$L"
step done; exit 0
