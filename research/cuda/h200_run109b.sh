#!/bin/bash
# Twenty-ninth session, second call (after run 109's checks are green): the Q4_K bs=1 decode A/B,
# QLIN_INT = 1 alone / with QLIN_FX + QLIN_M1_LEAN / with QLIN_FX + QLIN_MMA1 (kernels/
# linear_mma1.cu), in ABC CBA order, N = 5 each; then, gating nothing, a self-check with
# QTC_GEMM = 1 (the first tiled form, moved to kernels/linear_tct.cu, not run since).
# Prediction: FX + LEAN 343 -> 355-370 tok/s; MMA1 420-470 if the Q4_K kernels stay issue-bound.
# Usage: h200_run109b.sh MEMRA OUT_DIR (about 5 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/c-base.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_FX = "1"\nQLIN_M1_LEAN = "1"\n' > /tmp/c-fxl.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_FX = "1"\nQLIN_M1_LEAN = "1"\nQLIN_MMA1 = "1"\n' > /tmp/c-mma.toml
printf '[kernel_defines]\nQTC_GEMM = "1"\n' > /tmp/c-g1.toml
for c in base fxl mma mma fxl base; do
  step "decode q4_k bs=1, depth 128, $c"
  timeout 100 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q4k-$c.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step "self-check, QTC_GEMM = 1 (the tiled form's move; gates nothing above)"
timeout 100 $N --config /tmp/c-g1.toml probe --self-check > "$O/sc-g1.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-g1.txt" | tail -4 | cut -c1-220 | tee -a "$L"
step done
