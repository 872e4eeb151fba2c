#!/bin/bash
# Seventh session, call 3 (run 25): the integer tensor-core kernel with x staged once per linear
# (stage_x_int into a per-stream buffer, kernels/linear_int.cu) instead of in every block.
# Correctness first: the self-check with QLIN_INT=1, and with QIMMA_SLAB=8 (several slabs per
# linear); the CUDA lane with QLIN_INT=1. Then the kernel tables (M = 1, 8, 32, 128), bs=8/32
# decode with QLIN_INT=1 (Q8_0, Q4_K) and QTC=1 (Q8_0, the anchor of the same call), TTFT of
# 1,024 tokens, and bs=1 decode at depth 128 and 8,192 (target 5).
# Usage: h200_run25.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/int.toml
printf '[kernel_defines]\nQLIN_INT = "1"\nQIMMA_SLAB = "8"\n' > /tmp/int8.toml
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
for c in int int8; do
  step "self-check $c"; $B --config /tmp/$c.toml probe --self-check > "$O/selfcheck-$c.txt" 2>&1
  grep -E "linear_(q8_0|q4_k)|self-check|FAIL|rror" "$O/selfcheck-$c.txt" | tee -a "$L"
done
grep -q "self-check: PASS" "$O/selfcheck-int.txt" && grep -q "self-check: PASS" "$O/selfcheck-int8.txt" \
  || { step "self-check failed: kernel tables only"; OK=0; }
step kbench; timeout 150 $B probe --bench-kernels --kernel-tokens 1,8,32,128 --kernel-dtypes q8_0,q4_k \
  --variants "QLIN_INT=1;QLIN_INT=1,QIMMA_PF=0;QLIN_INT=1,QIMMA_NT=2;QLIN_INT=1,QIMMA_TILES=2;QLIN_INT=1,QLIN_M1_WARPS=16,QLIN_M1_PREFETCH=16;QLIN_INT=1,QLIN_M1_WARPS=8,QLIN_M1_PREFETCH=0,QLIN_M1_BIGK=8192,QLIN_M1_WARPS_BIGK=16,QLIN_M1_PREFETCH_BIGK=16" \
  > "$O/kbench.txt" 2>&1
grep -E "defines|(Q8_0|Q4_K).*(gate\+up|down) " "$O/kbench.txt" | tee -a "$L"
[ "${OK:-1}" = 0 ] && exit 0
step "gates QLIN_INT=1"
$B --config /tmp/int.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/int.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
for run in "int q8_0" "int q4_k" "tc q8_0"; do
  set -- $run
  step "decode bs=8,32 $2 $1"
  timeout 120 $B --backend cuda --config /tmp/$1.toml bench decode --model synth:llama-3.1-8b:$2 --batch 8,32 --depth 128 \
    --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
step "ttft 1024 q8_0 QLIN_INT=1"
timeout 100 $B --backend cuda --config /tmp/int.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "decode bs=1 depth 128 and 8192 q8_0 QLIN_INT=1"
timeout 150 $B --backend cuda --config /tmp/int.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128,8192 \
  --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step done
