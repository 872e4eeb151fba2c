#!/bin/bash
# Thirty-third session, after run 121 (H100: 2 x 4 rows at 2 blocks an SM, KUNROLL 1, the best rows
# form, 131.4 -> 109.4 ms BF16 TTFT of 1,024 tokens; now the built-in form, so ATTN_ROWS alone
# picks it). Two questions:
# 1. (H200 only) the same A/B on the H200, for boards/defaults/nvidia-h200.toml: self-check (f32
#    and f16 cache) and CUDA lanes with ATTN_ROWS = 2, then TTFT of 1,024 tokens ABBA shipped /
#    ATTN_ROWS = 64. Prediction: -12 to -17% as on the H100.
# 2. (any card) the threshold: short prompts (16, 32, 64, 128 tokens: one prefill chunk, that many
#    rows on one table) with ATTN_ROWS = 2 against the walking entry, ABBA. Prediction: the rows
#    entry wins from 64 rows (its blocks fill the SMs: 32 rows x 8 KV heads / 2 = 128 blocks) and
#    is even or slower at 16 (32 blocks on 132 SMs against the walking entry's 64).
# Usage: h200_run122.sh MEMRA OUT_DIR (about 4 minutes; 6 on an H200)
set -u
N=$1; O=$2
source "$(dirname "$0")/run_lib.sh"
run_start any
mk base
mk rows ATTN_ROWS=64
mk rows2 ATTN_ROWS=2
ok=0
case "$gpu" in
*H200*)
  green rows2 || { step "not green: no timing"; exit 1; }
  for c in base rows rows base; do
    step "ttft bf16 1024, $c"
    timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
      --reps 5 --out "$O/ttft-bf16.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
  done;;
esac
for c in base rows2 rows2 base; do
  step "ttft bf16 16-128, $c"
  timeout 80 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 16,32,64,128 \
    --reps 7 --out "$O/ttft-short.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done; exit $ok
