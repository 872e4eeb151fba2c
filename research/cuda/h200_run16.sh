#!/bin/bash
# Third device call of the fifth session: bench decode now samples on the device (forward_pick),
# graphed one-split steps walk attention in one kernel, RMSNorm in float4 registers on 256
# threads, QLIN_M1_UNROLL. Correctness first (self-check, CUDA lane on qwen3-random and the tiny
# models, cuda-graphs canaries); then the linear kernels at M = 1 and 8 for QLIN_M1_UNROLL 2, 4, 8
# (cold weights); then bs=1 decode on the 8B shape (depth 128, 256 new tokens, N = 5) for each
# dtype, and Q8_0/Q4_K again with QLIN_FACTOR=1.
# Usage: h200_run16.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "norm|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check failed: stop"; exit 1; }
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
step kbench; $B probe --bench-kernels --variants "QLIN_M1_UNROLL=2;QLIN_M1_UNROLL=4;QLIN_M1_UNROLL=8" > "$O/kbench.txt" 2>&1
grep -E "defines|  1 " "$O/kbench.txt" | tee -a "$L"
for d in q8_0 bf16 q4_k; do
  step "decode bs=1 depth 128 $d"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
    --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
printf '[kernel_defines]\nQLIN_FACTOR = "1"\n' > /tmp/qf.toml
for d in q8_0 q4_k; do
  step "decode bs=1 depth 128 $d QLIN_FACTOR=1"
  $B --backend cuda --config /tmp/qf.toml bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
    --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
