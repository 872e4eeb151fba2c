#!/bin/bash
# Thirty-fourth session. Two questions, one call (any card; the H200 defaults file elsewhere).
# 1. TCW_UPB = 2 (kernels/linear_tcw.cu): the wgmma GEMM computes two units between barriers and
#    issues the second unit's MMAs while the first unit's are folded. Run 115 (H100): the GEMM is
#    78 ms of a 131 ms BF16 TTFT of 1,024 tokens, 420 TFLOP/s of MMA work; by count the MMAs of
#    a unit take 512 tensor cycles a block and the unit takes about 1,150, the rest a barrier, A
#    fragment read and fold that every warpgroup waits out together. Prediction: the GEMM's
#    kernels at M = 1,024 -10 to -25%, BF16 TTFT -8 to -15 ms; TCW_STAGES 6 (three groups in the
#    ring, two ahead) at least as fast as 4; 3 units a group (TCW_UPB = 3) a little faster again. First the self-check (the phantom unit of an odd unit
#    count: K = 544 BF16, 1,056 Q8_0) and the CUDA lanes.
# 2. (run 122's) ATTN_ROWS = 64 in the H200 file: TTFT base / rows; and the short-prompt
#    threshold (16-128 rows, ATTN_ROWS = 2 against the walking entry), if time is left.
# Usage: h200_run123.sh MEMRA OUT_DIR (about 9 minutes)
set -u
N=$1; O=$2
source "$(dirname "$0")/run_lib.sh"
run_start any
mk base
mk u2 TCW_UPB=2
mk u2s6 TCW_UPB=2 TCW_STAGES=6
mk u3s6 TCW_UPB=3 TCW_STAGES=6
mk u2q4 TCW_UPB=2 TCW_STAGES=6 QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
mk rows ATTN_ROWS=64
mk ru2 ATTN_ROWS=64 TCW_UPB=2 TCW_STAGES=6
mk rows2 ATTN_ROWS=2
ok=0
green u2 || { step "TCW_UPB = 2 not green: no timing"; exit 1; }
for c in u2s6 u3s6 u2q4; do
  step "self-check, f32 cache, config $c"
  timeout 120 $N --config /tmp/c-$c.toml probe --self-check > "$O/sc-$c.txt" 2>&1
  grep -E "self-check: |FAIL|rror" "$O/sc-$c.txt" | tail -3 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$c.txt" || { step "$c not green: no timing"; exit 1; }
done
step "kernel table, M = 128 and 1,024"
timeout 150 $N probe --bench-kernels --kernel-tokens 128,1024 --kernel-dtypes bf16,q8_0 --kernel-shapes q/o,qkv,gate+up,down \
  --variants "TCW_UPB=1;TCW_UPB=2;TCW_UPB=2,TCW_STAGES=6;TCW_UPB=3,TCW_STAGES=6" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^TCW/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for c in base rows ru2 ru2 rows base; do
  step "ttft bf16 1024, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft-bf16.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in base rows2 rows2 base; do
  [ $(( $(date +%s) - t0 )) -lt 440 ] || { step "no time for the short prompts"; break; }
  step "ttft bf16 16-128, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 16,32,64,128 \
    --reps 5 --out "$O/ttft-short.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done; exit $ok
