#!/bin/bash
# Second device call of 2026-11-30: kernel self-check (after the 16-byte BF16/F16 linear), the
# CUDA lane's parity gates at real shapes (Llama-3.1-8B in BF16, Q8_0, Q4_K; Gemma-3-1B in Q4_K,
# random weights written by `memra synth`), and bs=1 decode on the 8B BF16 shape.
# Usage: research/cuda/h200_run2.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
pkill -x memra 2>/dev/null
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_(bf16|f16)|self-check" "$O/selfcheck.txt" | tee -a "$L"
step "gates real shapes"
$B gate --lane cuda --only gemma-3-1b --json "$O/gates.jsonl" 2>&1 | grep -E "GREEN|RED" | tee -a "$L"
$B gate --lane cuda --only llama-3.1-8b --json "$O/gates.jsonl" 2>&1 | grep -E "^(ok|FAIL)" | tee -a "$L"
step "bench decode bs=1 bf16"
$B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128 --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
