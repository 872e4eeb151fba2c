#!/bin/bash
# Thirtieth session: the Q4_K one-token lanes kernel's occupancy. It uses 58 registers, so a
# block of 16 warps (512 threads x 64 allocated registers = 32 Ki) fits twice an SM: 32 warps,
# what run 103b's "warps active 45%" shows. QLIN_M1_MINB asks the launch bounds for more blocks:
# 16 warps x 3 (40 registers, 68 bytes of spill) or 8 warps x 5 (48 registers, no spill) or 8 x 6
# (40, spill) hold 40-48 warps. QLIN_M1_WARPS = 32 is one block of 32 warps (x staged once for
# 32 rows). Kernel table at M = 1 for the 4 Q4_K matrices, then decode ABBA of the shipped set
# against W8/MINB5 (the variant the compile test allows), N = 5.
# Prediction: gate+up and down 10-20% faster with 40-48 warps (issue 63% at 32 warps leaves
# room; long scoreboard 3.5 a issue); q/o unchanged (256 row groups, one block an SM either way).
# Usage: h200_run112.sh MEMRA OUT_DIR (about 2.5 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/c-base.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_M1_WARPS = "8"\nQLIN_M1_MINB = "5"\n' > /tmp/c-w8b5.toml
step "self-check, W8 MINB5"
timeout 120 $N --config /tmp/c-w8b5.toml probe --self-check > "$O/sc-w8b5.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-w8b5.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-w8b5.txt" || { step "self-check not green: stop"; exit 1; }
step "kernel table, Q4_K, M = 1"
timeout 150 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QLIN_INT=1;QLIN_INT=1,QLIN_M1_MINB=3;QLIN_INT=1,QLIN_M1_WARPS=8,QLIN_M1_MINB=5;QLIN_INT=1,QLIN_M1_WARPS=8,QLIN_M1_MINB=6;QLIN_INT=1,QLIN_M1_WARPS=32" > "$O/kbench-q4k.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-q4k.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QLIN_M1_(MINB|WARPS)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for c in base w8b5 w8b5 base; do
  step "decode q4_k bs=1, depth 128, $c"
  timeout 100 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q4k-$c.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
