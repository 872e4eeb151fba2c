#!/bin/bash
# Twenty-ninth session, third call: QLIN_MMA1's second form (no shared-memory exchange: lane
# (g, t) gets S0, S1, S2 of unit u0 + t for rows g, g + 8 straight from two MMAs a word; 128
# instructions a step of 64 row-units against the lanes kernel's 200, 64 registers, no spills).
# Run 109 (H100) measured the first form at 1.6x the lanes kernel's time (ncu: issue 27%, short
# scoreboard 9.1 and MIO throttle 4.3 a issue, from the exchange). Self-check with it, the Q4_K
# kernel table (QLIN_INT = 1 against MMA1), ncu of gate+up, then the Q4_K bs=1 decode A/B (ABBA,
# N = 5). Trimmed to fit the session's last 280 s of device time (no tiny lane, one MMA1 shape).
# Prediction: gate+up and down 15-30% under the lanes kernel if the chain of 8 MMAs a step hides
# behind 32 warps an SM; decode +8-15%.
# Usage: h200_run110.sh MEMRA OUT_DIR (about 2 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/c-base.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_MMA1 = "1"\n' > /tmp/c-mma.toml
step "self-check, QLIN_INT = 1, QLIN_MMA1 = 1"
timeout 120 $N --config /tmp/c-mma.toml probe --self-check > "$O/sc-mma.txt" 2>&1
grep -E "self-check: |linear_q4_k|FAIL|rror" "$O/sc-mma.txt" | tail -5 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-mma.txt" || { step "self-check not green: stop"; exit 1; }
step "kernel table, Q4_K, M = 1: QLIN_INT / + MMA1"
timeout 120 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QLIN_INT=1;QLIN_INT=1,QLIN_MMA1=1" > "$O/kbench-q4k.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-q4k.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QLIN_(MMA1|MMA1_WG)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
M='gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum'
for st in long_scoreboard short_scoreboard wait barrier mio_throttle math_pipe_throttle not_selected; do M="$M,smsp__average_warps_issue_stalled_${st}_per_issue_active.ratio"; done
step "ncu, gate+up at M = 1, QLIN_MMA1 = 1"
timeout 60 ncu --clock-control none -k regex:'linear_q4_k' --launch-skip 6 --launch-count 1 --metrics "$M" \
  $N --config /tmp/c-mma.toml probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes gate+up > "$O/ncu-mma.txt" 2>&1
grep -E "^  [a-z_]+.*\(|gpu__time|dram__|issue_active|warps_active|stalled|inst_executed|ERROR" "$O/ncu-mma.txt" \
  | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/ +/ /g' | cut -c1-110 | tee -a "$L"
for c in base mma mma base; do
  step "decode q4_k bs=1, depth 128, $c"
  timeout 100 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q4k-$c.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
