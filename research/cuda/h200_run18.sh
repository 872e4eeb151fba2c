#!/bin/bash
# Check after the review fixes (a stream per backend, capture guard): the CUDA lane on
# qwen3-random and the tiny models, the cuda-graphs canaries, and bs=1 Q8_0 decode on the 8B shape
# (depth 128, 256 new tokens, N = 3) to see that per-backend streams cost nothing.
# Usage: h200_run18.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
step "decode bs=1 depth 128 q8_0"
$B --backend cuda bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 --new-tokens 256 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
