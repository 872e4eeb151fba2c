#!/bin/bash
# Prepared in the thirty-second session (after run 119, the same or the next call): ATTN_SKIP = 1,
# the score loop skipping a warp's 8 positions that are no row's keys (same bits). Two numbers:
# 256 new tokens from depth 128 put a row at positions 128-383, whose last split of 256 holds 1-256
# keys (half on average): a quarter to a half of the score work goes, and the score phase is about
# half of a split's work.
# Prediction: BF16 bs=1 decode at depth 128 +1 to +3% (attention about 10% of a step), TTFT of
# 1,024 tokens with ATTN_ROWS = 64 -3 to -6%.
# Order: self-check and CUDA lanes with ATTN_SKIP = 1 and ATTN_ROWS = 2 (stop if red); decode
# ABBA; TTFT rows with and without the skip.
# Usage: h200_run120.sh MEMRA OUT_DIR (about 5 minutes)
set -u
N=$1; O=$2
source "$(dirname "$0")/run_lib.sh"
run_start any
mk check ATTN_SKIP=1 ATTN_ROWS=2
mk base
mk skip ATTN_SKIP=1
mk rows ATTN_ROWS=64
mk rskip ATTN_ROWS=64 ATTN_SKIP=1
green check || { step "not green: no timing"; exit 1; }
for c in base skip skip base; do
  step "decode bf16 bs=1 depth 128, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1 \
    --depth 128 --new-tokens 256 --reps 5 --out "$O/decode1.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in rows rskip; do
  step "ttft bf16 1024, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
