#!/bin/bash
# Device call after run9: the repacked Q8_0/Q4_K decode kernels load a pass's weights before
# staging x and cover QLIN_UPL_M1 = 4 chunks (K = 4,096) per pass; attention loops unrolled
# further (bit-identical). Correctness first (self-check, CUDA lane on qwen3-random, the tiny
# models and the 8B shapes), then kernel benchmarks, bs=1 decode, and the per-kernel step profile.
# Usage: h200_run10.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_(q8|q4_k|bf16)|attn|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
for d in bf16 q8_0 q4_k; do
  $B synth --shape llama-3.1-8b --dtype $d --format gguf --out /tmp/s8-$d > /dev/null 2>&1
done
$B gate --lane cuda --only llama-3.1-8b --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
step kbench; $B probe --bench-kernels --variants "QLIN_FACTOR=0;QLIN_FACTOR=1;QLIN_FACTOR=1,QLIN_UPL_M1=2;QLIN_FACTOR=1,LIN_WARPS=8" > "$O/kbench.txt" 2>&1
printf '[kernel_defines]\nQLIN_FACTOR = "1"\n' > /tmp/qf.toml
for d in bf16 q8_0 q4_k; do
  step "decode bs=1 $d depth 128 (then QLIN_FACTOR=1)"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 128 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  [ $d = bf16 ] || $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 128 --reps 3 --config /tmp/qf.toml --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "ncu q8_0 step"; bash research/cuda/ncu_step.sh $B $O synth:llama-3.1-8b:q8_0 3000 1400 2>&1 | tail -14 | tee -a "$L"
step done
