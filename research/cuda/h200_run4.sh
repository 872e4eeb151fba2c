#!/bin/bash
# Fourth device call of 2026-11-30 (short: the session's last device minutes): self-check with
# the one-token (`_m1`) linear entries for decode, the CUDA lane on qwen3-random, then bs=1
# decode on the 8B shape in BF16 and Q8_0. Usage: research/cuda/h200_run4.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_(bf16|q8_0|q4_k)|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL" | tee -a "$L"
for d in bf16 q8_0; do
  step "bench decode bs=1 $d"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 128 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
