#!/bin/bash
# Thirty-fourth session, after run 123 (H100): TCW_UPB made Q8_0's wgmma GEMM 10-12% faster at
# M = 1,024 and BF16's up to 11% slower (BF16 is bound by the 24 KiB a unit a block reads from
# L2: about 1,040 cycles at ~24 bytes a cycle an SM against 1,256 measured; Q8_0 reads 20.3 KiB
# and spends more instructions a unit on its fragments and folds). TCW_UPB_Q sets the units for
# the Q8_0 and Q4_K entries alone. Green check (self-check f32 + f16, lanes) with TCW_UPB_Q = 3,
# TCW_STAGES = 6 and QTC_Q4_K = 2; kernel table Q8_0 and Q4_K at M = 128, 1,024; then Q8_0 TTFT
# of 1,024 tokens ABBA shipped / TCW_UPB_Q = 3, and Q4_K (QTC_Q4_K = 2, rows entry) with and
# without it. Prediction: Q8_0 TTFT -6 to -9% (its GEMM is about 60% of it); Q4_K -8 to -12%.
# Any card (H200 defaults file elsewhere). Usage: h200_run124.sh MEMRA OUT_DIR (about 5 minutes)
set -u
N=$1; O=$2
source "$(dirname "$0")/run_lib.sh"
run_start any
mk base
mk uq3 TCW_UPB_Q=3 TCW_STAGES=6
mk uq3c TCW_UPB_Q=3 TCW_STAGES=6 QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
mk wgr QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2 ATTN_ROWS=64
mk wgru QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2 ATTN_ROWS=64 TCW_UPB_Q=3 TCW_STAGES=6
green uq3c || { step "TCW_UPB_Q = 3 not green: no timing"; exit 1; }
step "kernel table, M = 128 and 1,024"
Q=QTC_Q4_K=2
timeout 120 $N probe --bench-kernels --kernel-tokens 128,1024 --kernel-dtypes q8_0,q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "$Q,TCW_UPB_Q=1;$Q,TCW_UPB_Q=2;$Q,TCW_UPB_Q=2,TCW_STAGES=6;$Q,TCW_UPB_Q=3,TCW_STAGES=6" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^TCW/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for c in base uq3 uq3 base; do
  step "ttft q8_0 1024, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 \
    --reps 5 --out "$O/ttft-q8.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in wgr wgru; do
  [ $(( $(date +%s) - t0 )) -lt 330 ] || { step "no time for Q4_K"; break; }
  step "ttft q4_k 1024, $c"
  timeout 50 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q4_k --prompt-len 1024 \
    --reps 3 --out "$O/ttft-q4k.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done; exit 0
