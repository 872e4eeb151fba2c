#!/bin/bash
# Twenty-seventh session, after run 105. Run 103 (QTC_WT_ALT = 3: the one-token entries of the
# matrices whose busiest SM gets fewer row tiles at 3 tiles a block, qkv's 384 tiles: 128 blocks
# against 192) with its self-check's fused test matrix fixed (R = 5456 on the H200), on top of
# QTC_Q8_M1 = 1 (the `_n1_alt` entries take the M = 1 loop too).
# 1. Self-check with QTC_WT_ALT = 3 and QTC_Q8_M1 = 1 (the R = 5456 row compares `_alt` rows
#    with the other entries' bits).
# 2. Kernel table at M = 1, Q8_0 and BF16, q/o, qkv, down: ALT 0 / 3.
# 3. Decode bs=1, depth 128, 128 new tokens, N = 3: Q8_0 and BF16, ALT 0 / 3, two rounds.
# Prediction (run 103's): qkv at M = 1 -2 to -3 us; Q8_0 bs=1 +2-3%, BF16 +1%.
# Usage: h200_run106.sh MEMRA OUT_DIR (about 5 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\nQTC_WT_ALT = "3"\n' > /tmp/c-a3.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\nQTC_WT_ALT = "0"\n' > /tmp/c-a0.toml
step "self-check, QTC_WT_ALT = 3, QTC_Q8_M1 = 1"
timeout 150 $B --config /tmp/c-a3.toml probe --self-check > "$O/sc-a3.txt" 2>&1
grep -E "self-check: |R=5456|FAIL|rror" "$O/sc-a3.txt" | tail -6 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-a3.txt" || { step "self-check not green: no timing"; exit 1; }
step "kernel table, Q8_0 and BF16, M = 1, ALT 0 / 3 (QTC_Q8_M1 = 1)"
timeout 200 $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0,bf16 --kernel-shapes q/o,qkv,down \
  --variants "QTC_Q8_M1=1,QTC_WT_ALT=0;QTC_Q8_M1=1,QTC_WT_ALT=3" > "$O/kbench-alt.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-alt.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_(WT_ALT|Q8_M1)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for round in 1 2; do
  for fmt in q8_0 bf16; do
    for a in a0 a3; do
      step "decode $fmt bs=1, depth 128, $a, round $round"
      timeout 100 $B --backend cuda --config /tmp/c-$a.toml bench decode --model synth:llama-3.1-8b:$fmt --batch 1 \
        --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" \
        | sed "s/^/$fmt $a /" | cut -c1-160 | tee -a "$L"
    done
  done
done
step done
