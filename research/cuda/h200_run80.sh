#!/bin/bash
# Prepared in the twentieth session (not run): attention's split size at bs=32. Run 74: attention
# is 25.7 us a layer at bs=32, depth about 140, 11.5% of the step; with ATTN_SPLIT = 256 a block
# walks 256 positions of which about 140 are real (the rest read pos's slot and are masked).
# ATTN_SPLIT = 128 gives two splits a row (split-parallel path, same grid shape per split).
# Bits differ between split sizes (the softmax merges differ), so a change needs the CUDA lane
# green under the new value and bs=1 at depth 2,048 not worse (the tuned metric, 128 and 256
# tied there: 262.4 / 262.7 tok/s). Prediction: bs=32 +1-3% with 128.
# Usage: h200_run80.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for v in 128 256; do printf '[kernel_defines]\nATTN_SPLIT = "%s"\n' $v > /tmp/c-as$v.toml; done
step "BF16 bs=32 depth 128, ATTN_SPLIT 256 / 128 / 256 / 128 (N = 5 each)"
for v in 256 128 256 128; do
  timeout 80 $B --backend cuda --config /tmp/c-as$v.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/as.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$v /" | cut -c1-200 | tee -a "$L"
done
step "BF16 bs=1 depth 2048, ATTN_SPLIT 256 / 128 (N = 5 each)"
for v in 256 128; do
  timeout 80 $B --backend cuda --config /tmp/c-as$v.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1 \
    --depth 2048 --new-tokens 64 --reps 5 --out "$O/as.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$v /" | cut -c1-200 | tee -a "$L"
done
step "CUDA lane qwen3 with ATTN_SPLIT = 128"
timeout 90 $B --config /tmp/c-as128.toml gate --lane cuda --only qwen3 > "$O/gates-qwen3.txt" 2>&1
grep -E "gates run|RED|rror" "$O/gates-qwen3.txt" | head -3 | cut -c1-200 | tee -a "$L"
step done
