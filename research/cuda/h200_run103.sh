#!/bin/bash
# Prepared in the twenty-fifth session (not run; no device was lent after run 101). Target 2,
# and the goal beyond target 1: the small matrices at M = 1. qkv has 384 row tiles: at QTC_WT = 2
# that is 192 blocks of 16 warps on 132 SMs (Q8_0 n1: 62 registers, two blocks fit an SM, so 60
# SMs hold two and 72 one), each warp streaming 8 units of 2 tiles, 2 units in flight. With
# QTC_WT_ALT = 3 the M = 1 rows of a matrix whose busiest SM gets fewer row tiles at 3 (qkv: 128
# blocks, 3 tiles an SM against 4) take the `_n1_alt` entries (NVRTC 13.0 here: Q8_0 76
# registers, BF16 64, no spill); q/o, down and the lm-head keep 2. Same bits (which block
# computes a row changes none of its operations); the self-check has a matrix that takes them.
# 1. Self-check with QTC_WT_ALT = 3.
# 2. Kernel table at M = 1, Q8_0 and BF16, q/o, qkv, down: QTC_WT 2 / 3 / 4 (every matrix) and
#    QTC_WT_ALT = 3.
# 3. Nsight Compute at M = 1 (shipped defaults): Q8_0, BF16 and Q4_K q/o and gate+up, stall reasons.
# 4. Decode bs=1, depth 128, 128 new tokens, N = 3: Q8_0 and BF16, QTC_WT_ALT 0 / 3.
# Prediction: qkv at M = 1 from 13.2 to about 10 us (Q8_0): Q8_0 bs=1 +2-3% (271 -> 277-279).
# Re-run in the twenty-seventh session after run 104, with the self-check's matrix fixed.
# Usage: h200_run103.sh MEMRA OUT_DIR (about 4 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_WT_ALT = "3"\n' > /tmp/c-a3.toml
printf '[kernel_defines]\nQTC_WT_ALT = "0"\n' > /tmp/c-a0.toml
step "self-check, QTC_WT_ALT = 3"
timeout 150 $B --config /tmp/c-a3.toml probe --self-check > "$O/sc-a3.txt" 2>&1
grep -E "self-check: |R=5456|FAIL|rror" "$O/sc-a3.txt" | tail -6 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-a3.txt" || { step "self-check not green: no timing"; exit 1; }
step "kernel table, Q8_0 and BF16, M = 1"
timeout 200 $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0,bf16 --kernel-shapes q/o,qkv,down \
  --variants "QTC_WT=2;QTC_WT=3;QTC_WT=4;QTC_WT_ALT=3" > "$O/kbench-wt.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-wt.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_WT(_ALT)?=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
# Step 3 (Nsight Compute) ran on its own as run 103b (h200_run103b.sh).
for fmt in q8_0 bf16; do
  for a in a0 a3; do
    step "decode $fmt bs=1, depth 128, $a"
    timeout 100 $B --backend cuda --config /tmp/c-$a.toml bench decode --model synth:llama-3.1-8b:$fmt --batch 1 \
      --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$fmt $a /" | cut -c1-160 | tee -a "$L"
  done
done
step done
