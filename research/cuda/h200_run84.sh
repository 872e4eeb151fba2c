#!/bin/bash
# Prepared in the twenty-first session (not run): the board's cells for the shipped H200
# defaults (boards/defaults/nvidia-h200.toml: BF16 and Q8_0 on the tensor cores, XSPLIT = 2,
# Q4_K on exact integers, TCS_GLU = 1), all at N = 5, so the README's speed table and
# PERFORMANCE.md carry current figures instead of N = 3 rows of earlier settings (which the
# boards now mark †). Two parts of about 5 minutes each (every invocation loads the 8B model,
# about 50 s): run each as its own device call.
#   a: decode, depth 128, 128 new tokens, bs = 1, 8, 32 for BF16, Q8_0, Q4_K; BF16 bs = 1 at
#      depths 2,048 and 8,192 (target 5's depth ratio).
#   b: TTFT of 1,024-token prompts for BF16, Q8_0, Q4_K; `bench serve` BF16 closed loop
#      c = 1, 8, 32, 64 (128-token prompts, 128 new tokens).
# Prediction (runs 45-82): BF16 bs=1 about 220, bs=32 about 4,880; Q8_0 bs=1 about 262; Q4_K bs=1
# about 336; depth 8,192 within 10% of depth 128; TTFT BF16 about 128 ms, Q8_0 about 125 ms.
# Usage: h200_run84.sh MEMRA OUT_DIR a|b   (rows: OUT_DIR/board.jsonl, append them to
# research/tune-data/nvidia-h200.jsonl and run `memra boards`)
set -u
B=$1; O=$2; P=$3; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
run() { timeout "$1" $B --backend cuda bench "${@:2}" --reps 5 --out "$O/board.jsonl" 2>&1 \
  | grep -E "^(decode|ttft|serve)|rror" | cut -c1-200 | tee -a "$L"; }
if [ "$P" = a ]; then
  for d in bf16 q8_0 q4_k; do
    step "decode $d, bs 1/8/32, depth 128"
    run 120 decode --model synth:llama-3.1-8b:$d --batch 1,8,32 --depth 128 --new-tokens 128
  done
  step "decode bf16, bs 1, depth 2048/8192"
  run 120 decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 2048,8192 --new-tokens 128
else
  for d in bf16 q8_0 q4_k; do
    step "ttft $d, 1024 tokens"
    run 100 ttft --model synth:llama-3.1-8b:$d --prompt-len 1024
  done
  step "serve bf16, closed loop c = 1/8/32/64"
  run 200 serve --model synth:llama-3.1-8b:bf16 --concurrency 1,8,32,64 --input-len 128 --new-tokens 128
fi
step done
