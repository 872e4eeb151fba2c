#!/bin/bash
# For an H200 only (run 109 ran on an H100): the decisions run 109 could not make for the H200's
# defaults file. (1) Q8_0 at M = 1, QTC_Q8_M1 1 against 2: kernel table and bs=1 decode ABBA,
# N = 5 (H100: +1.2%; ship 2 in boards/defaults/nvidia-h200.toml if it holds beyond the spread,
# with this metric, then remove the M1 = 1 loop). (2) Q4_K at M = 1, QLIN_INT = 1 alone / with
# QLIN_FX / with QLIN_M1_LEAN (H100: both 5-8% slower; remove both if the H200 agrees).
# Usage: h200_run111.sh MEMRA OUT_DIR (about 4 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) echo "not an H200: these decisions are the H200's; stop" | tee -a "$L"; exit 1;; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\n' > /tmp/c-m1.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\n' > /tmp/c-m2.toml
step "self-check, QTC_Q8_M1 = 2"
timeout 120 $N --config /tmp/c-m2.toml probe --self-check > "$O/sc-m2.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-m2.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-m2.txt" || { step "self-check not green: stop"; exit 1; }
step "kernel table, Q8_0, M = 1: QTC_Q8_M1 1 / 2"
timeout 120 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0 --kernel-shapes q/o,qkv,gate+up,down,lm-head \
  --variants "QTC_Q8_M1=1;QTC_Q8_M1=2" > "$O/kbench-q8.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-q8.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_Q8_M1=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
step "kernel table, Q4_K, M = 1: QLIN_INT / + FX / + LEAN"
timeout 120 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QLIN_INT=1;QLIN_INT=1,QLIN_FX=1;QLIN_INT=1,QLIN_M1_LEAN=1" > "$O/kbench-q4k.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-q4k.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QLIN_(FX|M1_LEAN)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for m in m1 m2 m2 m1; do
  step "decode q8_0 bs=1, depth 128, $m"
  timeout 100 $N --backend cuda --config /tmp/c-$m.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q8-$m.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$m /" | cut -c1-160 | tee -a "$L"
done
step done
