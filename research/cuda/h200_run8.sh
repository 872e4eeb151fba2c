#!/bin/bash
# Device call after run7: exact 2^23-trick int-to-float in the Q8_0/Q4_K kernels (bit-identical),
# attention loops unrolled, RMSNorm with 1024 threads. Correctness first (self-check, CUDA lane on
# qwen3-random and the tiny models), then bs=1 decode on the 8B shape at depth 128, and the
# per-kernel GPU time of a decode step. Usage: h200_run8.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "attn|rms|q8_0|q4_k|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
for d in bf16 q8_0 q4_k; do
  $B synth --shape llama-3.1-8b --dtype $d --format gguf --out /tmp/s8-$d > /dev/null 2>&1
  for depth in 128; do
    step "decode bs=1 $d depth $depth"
    $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth $depth --new-tokens 128 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  done
done
step "ncu bf16 step"; bash research/cuda/ncu_step.sh $B $O synth:llama-3.1-8b:bf16 3000 1400 2>&1 | tail -14 | tee -a "$L"
step done
