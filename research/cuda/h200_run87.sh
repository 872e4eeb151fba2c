#!/bin/bash
# Twenty-second session: why the f16 KV cache was slower than the f32 one in run 86 (BF16 bs=1:
# depth 128 214.1 vs 224.8, depth 8,192 173.8 vs 195.5 tok/s) although it reads half the bytes.
# Decode attention alone, 8B head shape (32 q heads, 8 KV heads, head_dim 128), 1 row, depths
# 128 / 2,048 / 8,192, shipped H200 defines (ATTN_HEADS 2, ATTN_SPLIT 256): f32 cache, then f16
# with its own defaults (ATTN_KORDER 1, ATTN_KUNROLL 4) against the f32 order (KORDER 0,
# KUNROLL 8), ATTN_HEADS 4 and ATTN_KV16W 1.
# Prediction: f16 at depth 8,192 under the f32 time (half the bytes) if the kernel is
# bandwidth-bound; if the f16 kernel is slower, the per-layer difference (run 86: about 7 us at
# depth 128, 21 us at 8,192) shows here.
# Usage: h200_run87.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "attention, f32 cache"
timeout 90 $B probe --bench-kernels --kernel-ops attn --attn-rows 1,8 --attn-depths 128,2048,8192 \
  > "$O/kbench-attn-f32.txt" 2>&1
grep -E "defines|attn |rror" "$O/kbench-attn-f32.txt" | cut -c1-140 | tee -a "$L"
step "attention, f16 cache"
timeout 150 $B --kv-cache-dtype f16 probe --bench-kernels --kernel-ops attn --attn-rows 1,8 --attn-depths 128,2048,8192 \
  --variants ";ATTN_KORDER=0,ATTN_KUNROLL=8;ATTN_HEADS=4;ATTN_KV16W=1" > "$O/kbench-attn-f16.txt" 2>&1
grep -E "defines|attn |rror" "$O/kbench-attn-f16.txt" | cut -c1-140 | tee -a "$L"
step done
