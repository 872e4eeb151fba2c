#!/bin/bash
# Device call (fourth session): the repacked Q8_0/Q4_K linears stage x in shared memory (lane reads
# conflict-free instead of 32 cache lines per warp load; Q4_K quants re-laid 16 bytes per
# sub-block), and Q|K|V and gate|up run fused (rows concatenated, one launch). Correctness first
# (self-check, CUDA lane on qwen3-random, the tiny models and the 8B shapes), then the kernel
# benchmark with variants, then bs=1 decode on the 8B shape. Usage: h200_run9.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
for d in bf16 q8_0 q4_k; do
  $B synth --shape llama-3.1-8b --dtype $d --format gguf --out /tmp/s8-$d > /dev/null 2>&1
done
$B gate --lane cuda --only llama-3.1-8b --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED|GREEN" | tee -a "$L"
step kbench; $B probe --bench-kernels --variants "QLIN_FACTOR=0;QLIN_FACTOR=1;QLIN_FACTOR=1,LIN_ROWS_M1=2;LIN_WARPS=8" > "$O/kbench.txt" 2>&1
grep -E "defines|M=|kernel|  1 |  8 " "$O/kbench.txt" | grep -v "^$" | tee -a "$L" >/dev/null
for d in bf16 q8_0 q4_k; do
  step "decode bs=1 $d depth 128"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 128 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "decode bs=1 q8_0 and q4_k depth 128, QLIN_FACTOR=1"
printf '[kernel_defines]\nQLIN_FACTOR = "1"\n' > /tmp/qf.toml
for d in q8_0 q4_k; do
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 128 --reps 3 --config /tmp/qf.toml --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
