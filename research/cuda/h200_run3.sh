#!/bin/bash
# Third device call of 2026-11-30: self-check with the repacked Q8_0/Q4_K linears, the CUDA lane
# on qwen3-random and the tiny synthetic models (after the Drafter refactor), and bs=1 decode on
# the 8B shape in Q8_0 and Q4_K. Usage: research/cuda/h200_run3.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
pkill -x memra 2>/dev/null
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_q|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL" | tee -a "$L"
for d in q8_0 q4_k; do
  step "bench decode bs=1 $d"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
