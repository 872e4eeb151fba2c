#!/bin/bash
# Run 142 (forty-first session): where a bs=32 decode step's GPU time goes (target 3: 5,159 tok/s
# on the H200 board against >= 5,485). Shipped defaults, f16 KV cache, BF16 Llama-3.1-8B shape.
# 1. decode bs=32, depth 128, 128 new tokens, N = 3: the step's wall time (the reference that the
#    kernels' sum is compared with; the difference is launch gaps and host time).
# 2. ncu_step.sh at bs=32 (durations only, clocks left alone): the per-kernel sum a step.
# 2b (before the ncu): q/o at M = 32 on the wgmma split-K form again (TCK_MIN_MB = 0; run 71 had
#    it 19.3 against 17.05 us on the one-token form, before TCK_BULK's descriptors and tck-desc):
#    kernel table at M = 32, then bs=32 decode ship / sk0 / ship if the table has it faster.
#    Prediction: q/o 15-17 us with its reduce (the one-token form is L1-bound on x: each block
#    reads all 512 KB of x for 256 KB of weights); decode +0.5-1.5% if so.
# Prediction: linear kernels 70-75% of the step, attention 8-12%, the split-K reduces 5-8%,
#   the rest (norms, rope, swiglu, sampling) under 10%; kernels' sum within 5% of the wall step.
# Usage: h200_run142.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-500}
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
step "decode bs=32, ship"
timeout 90 $N --backend cuda --kv-cache-dtype f16 --config /tmp/c-ship.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-160 | tee -a "$L"
mk sk0 TCK_MIN_MB=0
step "kernel table, M = 32: ship, TCK_MIN_MB = 0"
timeout 90 $N probe --bench-kernels --kernel-tokens 32 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
  --variants ";TCK_MIN_MB=0" > "$O/kbench32.txt" 2>&1
grep -E "^linear |rror" "$O/kbench32.txt" | cut -c1-100 | tee -a "$L"
for c in sk0 ship; do
  left $((B - 200)) "decode $c" || break
  step "decode bs=32, $c"
  timeout 90 $N --backend cuda --kv-cache-dtype f16 --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 32 --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" \
    | cut -c1-160 | tee -a "$L"
done
left $((B - 120)) "ncu step" || exit 0
step "ncu step bs=32"
mkdir -p "$O/ncu"
BATCH=32 GLOBAL="--kv-cache-dtype f16" timeout $((B - 60 - $(date +%s) + t0)) bash "$D/ncu_step.sh" "$N" "$O/ncu" \
  synth:llama-3.1-8b:bf16 8000 1600 2>&1 | tee -a "$L"
tail -5 "$O/ncu/ncu.err" | cut -c1-200 | tee -a "$L"
step done; exit 0
