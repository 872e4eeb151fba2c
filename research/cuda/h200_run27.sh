#!/bin/bash
# Seventh session, call 5 (run 27): digits_combine converts by the 2^23 trick instead of I2F
# (exact, same values), Q4_K's integer kernel without the weight prefetch. Self-check and the
# tiny-model lane with QLIN_INT=1, the kernel table (QIMMA_TILES 1 and 2), Q4_K bs=8/32 decode.
# Usage: h200_run27.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/int.toml
step "self-check int"; $B --config /tmp/int.toml probe --self-check > "$O/selfcheck-int.txt" 2>&1
grep -E "linear_(q8_0|q4_k)|self-check|FAIL|rror" "$O/selfcheck-int.txt" | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck-int.txt" || { step "self-check failed"; exit 0; }
step "gates tiny int"
$B --config /tmp/int.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step kbench; timeout 80 $B probe --bench-kernels --kernel-tokens 1,8,32,128 --kernel-dtypes q8_0,q4_k \
  --variants "QLIN_INT=1;QLIN_INT=1,QIMMA_TILES=2" > "$O/kbench.txt" 2>&1
grep -E "defines|(Q8_0|Q4_K).*(gate\+up|down) " "$O/kbench.txt" | tee -a "$L"
step "decode bs=8,32 q4_k int"
timeout 80 $B --backend cuda --config /tmp/int.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 8,32 --depth 128 \
  --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step done
