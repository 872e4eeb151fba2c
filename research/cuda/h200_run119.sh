#!/bin/bash
# Prepared in the thirty-second session for the next H200. The thirty-third lets it run on any card
# (another card runs with the H200 defaults file); settings go into boards/defaults/nvidia-h200.toml
# only on H200 figures.
# 1. Self-check and CUDA lanes (tiny, qwen3) with ATTN_ROWS = 2 and QTC_Q4_K = 2 together; stop
#    if red.
# 2. ATTN_ROWS (the prefill rows attention, 4 rows x 4 heads, columns outer): BF16 TTFT of 1,024
#    tokens, N = 5, ABBA against the shipped defaults. H100 (runs 116/118): 131.5 -> 121.1 ms.
#    Prediction on the H200: -7 to -9%. Then two forms at 2 blocks an SM (128 registers, no
#    spill at NVRTC 13.0): 4 x 4 with one key column ahead and V batches of 4 (r44m), 2 x 4 with
#    one key column ahead (r24m); prediction: 5-15% below `rows` (twice the warps a scheduler; run
#    118 found 2 warps a scheduler with 0.32 eligible).
# 3. QTC_Q4_K = 2 against the lanes by the request-time metric of QTC_Q8_0 (run 54): TTFT of 1,024
#    + 255 steps at the bs=1 rate. H100 (run 114): 1,816 -> 1,309 ms. Prediction: -25 to -30%.
# Usage: h200_run119.sh MEMRA OUT_DIR (about 8 minutes)
set -u
N=$1; O=$2
source "$(dirname "$0")/run_lib.sh"
run_start any
mk check ATTN_ROWS=2 QTC_Q4_K=2
mk base
mk rows ATTN_ROWS=64
mk r44m ATTN_ROWS=64 ATTN_ROWS_MINB=2 ATTN_ROWS_KUNROLL=1 ATTN_ROWS_VBATCH=4
mk r24m ATTN_ROWS=64 ATTN_ROWS_Q=2 ATTN_ROWS_MINB=2 ATTN_ROWS_KUNROLL=1
mk lanes
mk wg QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
green check || { step "not green: no timing"; exit 1; }
for c in base rows rows base r44m r24m; do
  step "ttft bf16 1024, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft-bf16.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in wg lanes; do
  step "ttft q4_k 1024, $c"
  timeout 50 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q4_k --prompt-len 1024 \
    --reps 3 --out "$O/ttft-q4k.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
  step "decode q4_k bs=1, $c"
  timeout 45 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode1-q4k.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
