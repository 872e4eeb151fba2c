#!/bin/bash
# Prepared in the sixth session for the next one's first device call (not yet run): the exact
# integer path (QLIN_INT=1: dp4a at M = 1, integer tensor cores for M > 1, kernels/linear_int.cu)
# and the big-K one-token entry. Correctness first: the self-check with QLIN_INT=1 (its M > 1
# rows must equal the M = 1 rows bit for bit), with QLIN_IMMA=0 as a fallback probe; the CUDA lane
# with it; then the linear kernels at M = 1, 8, 32 (Q8_0, Q4_K); then bs=1 and bs=32 decode on the
# 8B shape, QLIN_INT 1 against the defaults, and a 1,024-token Q8_0 prefill.
# Usage: h200_next_a.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/int.toml
step "self-check QLIN_INT=1"; $B --config /tmp/int.toml probe --self-check > "$O/selfcheck-int.txt" 2>&1
grep -E "linear_(q8_0|q4_k)|self-check|FAIL|rror" "$O/selfcheck-int.txt" | tee -a "$L"
if ! grep -q "self-check: PASS" "$O/selfcheck-int.txt"; then
  printf '[kernel_defines]\nQLIN_INT = "1"\nQLIN_IMMA = "0"\n' > /tmp/int0.toml
  step "self-check QLIN_INT=1 QLIN_IMMA=0 (is it the IMMA kernel?)"
  $B --config /tmp/int0.toml probe --self-check > "$O/selfcheck-int0.txt" 2>&1
  grep -E "linear_(q8_0|q4_k)|self-check" "$O/selfcheck-int0.txt" | tee -a "$L"
fi
step kbench; $B probe --bench-kernels --kernel-tokens 1,8,32 --kernel-dtypes q8_0,q4_k \
  --variants "QLIN_INT=0;QLIN_INT=1;QLIN_INT=1,QLIN_IMMA=0;QLIN_INT=1,QIMMA_TILES=2;QLIN_INT=1,QIMMA_EARLY=0;QLIN_M1_WARPS=8,QLIN_M1_PREFETCH=0,QLIN_M1_BIGK=8192,QLIN_M1_WARPS_BIGK=16,QLIN_M1_PREFETCH_BIGK=16" \
  > "$O/kbench.txt" 2>&1
grep -E "defines|(Q8_0|Q4_K).*(gate\+up|down) " "$O/kbench.txt" | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck-int.txt" || { step "QLIN_INT self-check failed: no end-to-end runs"; exit 0; }
step "gates QLIN_INT=1"
$B --config /tmp/int.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/int.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
for d in q8_0 q4_k; do
  for c in "" "--config /tmp/int.toml"; do
    step "decode bs=1 and bs=32 $d ${c:-defaults}"
    $B --backend cuda $c bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 \
      --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
    $B --backend cuda $c bench decode --model synth:llama-3.1-8b:$d --batch 32 --depth 128 --new-tokens 64 \
      --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  done
done
step "ttft 1024 q8_0 QLIN_INT=1"
$B --backend cuda --config /tmp/int.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
