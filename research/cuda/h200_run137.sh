#!/bin/bash
# Run 137 (prepared in the thirty-ninth session, branch tck-desc): the wgmma split-K form's
# descriptors by one add (kernels/linear_tck.cu), as run 135b did for linear_tcw (BF16 GEMMs
# 4.6-7% faster, TTFT -4.2% on an H100). NVRTC, H200 file: the issue window of 16 HGMMA from 127
# to 101 instructions (linear_tck_bf16_n32), 138 -> 136 registers, no spill.
# Two binaries: A (main's code) and B (this branch). Same descriptors: same bits.
# 1. Green (B): self-check f32 and f16, CUDA lanes.
# 2. Kernel table at M = 32, BF16, A and B.
# 3. BF16 decode bs=32 (f16 cache, depth 128, 128 new tokens, N = 3): A B B A.
# Prediction: qkv, gate+up, down at M = 32 1-4% faster (the form is near its bandwidth); bs=32
# +1-2%.
# Usage: h200_run137.sh MEMRA_A MEMRA_B OUT_DIR [SECONDS]
set -u
NA=$1; NB=$2; O=$3; B=${4:-400}
N=$NB
source "$(dirname "$0")/run_lib.sh"
run_start any
case "$N" in *device-defaults*) NA="$NA --device-defaults boards/defaults/nvidia-h200.toml";; esac
NB=$N
mk ship
green ship || { step "B not green: no timing"; exit 1; }
for b in A B; do
  [ $b = A ] && M=$NA || M=$NB
  step "kernel table $b, M = 32, BF16"
  timeout 60 $M probe --bench-kernels --kernel-tokens 32 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
    > "$O/kbench-$b.txt" 2>&1
  grep -E "^linear |rror" "$O/kbench-$b.txt" | cut -c1-100 | sed "s/^/$b /" | tee -a "$L"
done
for b in A B B A; do
  [ $b = A ] && M=$NA || M=$NB
  left $((B - 40)) "decode $b" || break
  step "decode bs=32, $b"
  timeout 90 $M --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$b /" | cut -c1-160 | tee -a "$L"
done
step done; exit 0
