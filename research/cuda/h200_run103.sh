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
# Usage: h200_run103.sh MEMRA OUT_DIR (about 5 minutes)
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
# Why the small Q8_0 matrices sit at 44-57% of copy bandwidth at M = 1 against BF16's ~85%
# (twenty-sixth session, no device: the reading is open): Nsight Compute on the one-token
# entries of the shipped defaults, cold L2. Long-scoreboard stalls dominating with DRAM well
# under its peak = too few bytes in flight a warp between round trips; barrier/MIO = the
# slices' reduce; an issue-active figure near 100% = instruction-bound (the int8 -> bf16
# conversion and the x parts). Q8_0 and BF16 compare the same kernel with half the bytes; Q4_K
# (exact integers, the lane kernel `linear_q4_k_r_m1`, 37% of copy bandwidth) is target 2's other half.
M='gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active'
for st in long_scoreboard wait barrier lg_throttle mio_throttle short_scoreboard math_pipe_throttle not_selected no_instruction; do
  M="$M,smsp__average_warps_issue_stalled_${st}_per_issue_active.ratio"
done
for fmt in q8_0 bf16 q4_k; do
  for shape in q/o gate+up; do
    f=$fmt-$(echo $shape | tr /+ __)
    step "ncu, one-token entry at M = 1, $fmt $shape"
    timeout 90 ncu --clock-control none -k regex:'linear_(tc|q4_k)' --launch-skip 6 --launch-count 1 --metrics "$M" \
      $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes $fmt --kernel-shapes $shape \
      > /tmp/ncu-$f.txt 2>&1
    grep -E "^  [a-z_]+.*\(|gpu__time|dram__|issue_active|warps_active|stalled|ERROR" /tmp/ncu-$f.txt \
      | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/ +/ /g' | cut -c1-110 | tee -a "$L"
  done
done
for fmt in q8_0 bf16; do
  for a in a0 a3; do
    step "decode $fmt bs=1, depth 128, $a"
    timeout 100 $B --backend cuda --config /tmp/c-$a.toml bench decode --model synth:llama-3.1-8b:$fmt --batch 1 \
      --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$fmt $a /" | cut -c1-160 | tee -a "$L"
  done
done
step done
