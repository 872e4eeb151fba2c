#!/bin/bash
# First device call of the sixth session: the multi-token quantized kernel (QLIN_MT=1), never run
# before. Correctness first: the self-check with the default defines (the unit_xsum refactor) and
# with QLIN_MT=1 (its rows against the CPU and across M), the CUDA lane on qwen3-random and the
# tiny models with QLIN_MT=1, and the cuda-graphs canaries. Then the linear kernels at
# M = 1, 4, 8, 16, 32 for QLIN_MT 0/1 and QLIN_MT_ROWS 1/2/4; then bs=32 Q8_0 decode on the 8B
# shape with QLIN_MT 1 and 0, and bs=1 Q8_0 (N = 5) with the defaults.
# Usage: h200_run19.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_MT = "1"\n' > /tmp/mt.toml
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_q8_0|linear_q4_k|self-check|FAIL|no  " "$O/selfcheck.txt" | tee -a "$L"
step "self-check QLIN_MT=1"; $B --config /tmp/mt.toml probe --self-check > "$O/selfcheck-mt.txt" 2>&1; grep -E "linear_q8_0|linear_q4_k|self-check|FAIL|no  " "$O/selfcheck-mt.txt" | tee -a "$L"
step "gates QLIN_MT=1"; $B --config /tmp/mt.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/mt.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B --config /tmp/mt.toml gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
step kbench; $B probe --bench-kernels --kernel-tokens 1,4,8,16,32 \
  --variants "QLIN_MT=0;QLIN_MT=1;QLIN_MT=1,QLIN_MT_ROWS=1;QLIN_MT=1,QLIN_MT_ROWS=4" > "$O/kbench.txt" 2>&1
grep -E "defines|Q8_0.*(gate\+up|down) +(8|32) " "$O/kbench.txt" | tee -a "$L"
step "decode bs=32 depth 128 q8_0 QLIN_MT=1"
$B --backend cuda --config /tmp/mt.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 --depth 128 \
  --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "decode bs=32 depth 128 q8_0 QLIN_MT=0"
$B --backend cuda bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 --depth 128 \
  --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "decode bs=1 depth 128 q8_0"
$B --backend cuda bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 --new-tokens 256 \
  --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
