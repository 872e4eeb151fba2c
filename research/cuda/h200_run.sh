#!/bin/bash
# One device call on the GPU machine (../shared/DEVICE.md): the CUDA lane of the gates on
# synthetic checkpoints (with canaries), then first speed figures on the Llama-3.1-8B shape
# (random weights written there by `memra synth`). Correctness before timing; a short table last.
# Usage: research/cuda/h200_run.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
pkill -x memra 2>/dev/null  # servers left by an earlier call
step() { echo "== $*" | tee -a "$L"; }
step probe; $B probe > "$O/probe.txt" 2>&1; tail -2 "$O/probe.txt" | tee -a "$L"
step gates tiny; $B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | tail -9 | tee -a "$L"
step canaries tiny; $B gate --lane cuda --only tiny --canary --json "$O/canary.jsonl" 2>&1 | tail -9 | tee -a "$L"
for d in bf16 q8_0 q4_k; do
  m=synth:llama-3.1-8b:$d
  step "run $m (prefill vs decode agreement)"
  $B --backend cuda run $m --prompt "The quick brown fox jumps over the lazy dog." --max-tokens 32 --temperature 0 2>&1 | tail -2 | tee -a "$L"
  step "bench decode bs=1 $m"
  $B --backend cuda bench decode --model $m --batch 1 --depth 128 --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
m=synth:llama-3.1-8b:bf16
step "bench ttft $m"; $B --backend cuda bench ttft --model $m --prompt-len 128,1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step "bench decode bs=32 $m"; $B --backend cuda bench decode --model $m --batch 32 --depth 128 --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "gates real shapes"; $B gate --lane cuda --only gemma-3-1b --json "$O/gates.jsonl" 2>&1 | tail -3 | tee -a "$L"
$B gate --lane cuda --only llama-3.1-8b --json "$O/gates.jsonl" 2>&1 | tail -3 | tee -a "$L"
step done
