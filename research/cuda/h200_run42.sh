#!/bin/bash
# Eleventh session: the H200 defaults after run 40's tune (ATTN_HEADS 2, NORM_THREADS 512,
# LIN_ROWS 2, QLIN_M1_PREFETCH 4, spec constants) plus run 41's QTC_SPLIT_BIG = 4 and
# QTC_GEMM_XASYNC = 1. Checks first (self-check, CUDA lane qwen3 and tiny), then the board cells:
# BF16 bs=1 and 32, Q8_0 and Q4_K bs=1 (depth 128, 128 new tokens, N = 5).
# Usage: h200_run42.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "self-check, defaults"
timeout 60 $B probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane, defaults: $g"
  timeout 40 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED" "$O/gates-$g.txt" | tee -a "$L"
done
step "BF16 decode bs=1,32"
timeout 150 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32 --depth 128 \
  --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
for q in q8_0 q4_k; do
  step "$q decode bs=1"
  timeout 90 $B --backend cuda bench decode --model synth:llama-3.1-8b:$q --batch 1 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
