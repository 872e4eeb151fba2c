#!/bin/bash
# Twenty-eighth session, second call (after run 108's checks are green): Q4_K at M = 1 with
# QLIN_FX (the unit's Σx term formed once at staging) and QLIN_M1_LEAN (the one-token lanes loop
# with its addressing out of the loop and a branch-free scale decode). SASS (NVRTC 13.0, sm_90a,
# H200 defines): the loop 100 -> 89 instructions a unit with FX (56 registers), 83 with LEAN (64),
# 76 with both (62). Same bits (run 108's self-check and tiny lane).
# Prediction: Q4_K kernels at M = 1 8-15% faster with both; bs=1 decode 343 -> 355-370 tok/s.
# Usage: h200_run108b.sh MEMRA OUT_DIR (about 6 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
# On another card (the device tool may lend an H100), the H200's tuned defaults are named so that
# the A/B runs the same defines; timings then are that card's, not the H200 board's.
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_FX = "0"\n' > /tmp/c-base.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_FX = "1"\nQLIN_M1_LEAN = "1"\n' > /tmp/c-fxl.toml
step "kernel table, Q4_K, M = 1: default / FX / LEAN / FX + LEAN / FX + LEAN at unroll 2"
timeout 150 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QLIN_INT=1;QLIN_INT=1,QLIN_FX=1;QLIN_INT=1,QLIN_M1_LEAN=1;QLIN_INT=1,QLIN_FX=1,QLIN_M1_LEAN=1;QLIN_INT=1,QLIN_FX=1,QLIN_M1_LEAN=1,QLIN_M1_UNROLL=2" > "$O/kbench-q4k.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-q4k.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QLIN_(FX|M1_LEAN|M1_UNROLL)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for round in 1 2; do
  for c in base fxl; do
    step "decode q4_k bs=1, depth 128, $c, round $round"
    timeout 100 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q4k-$c.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
  done
done
step done
