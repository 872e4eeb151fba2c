#!/bin/bash
# Seventeenth session: the committed H200 defaults as shipped (QTC_GEMM = 3 since 2026-12-03),
# no config file: self-check, CUDA lane tiny + qwen3, BF16 TTFT of 1,024 tokens.
# Usage: h200_run65.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
timeout 90 $B probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror|defaults" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in tiny qwen3; do
  timeout 60 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, shipped defaults: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
step "BF16 TTFT 1,024, shipped defaults (the call makes the checkpoint first)"
timeout 150 $B --backend cuda bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 3 \
  --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
step done
