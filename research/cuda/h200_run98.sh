#!/bin/bash
# Twenty-fourth session, after run 97 (the V sum's loads batched: f16 attention one row at depth
# 8,192 50.3 -> 30.0 us, f32 unchanged; decode bs=1 depth 128 / 8,192: f16 227.1 / 197.3, f32
# 226.5 / 196.4, both -13%). New: ATTN_WIDE_SPLITS (a step whose rows reach that many KV
# splits runs the 4-heads-a-block `_wide` entries; under a CUDA graph the grid's split count,
# 64 at depth 8,192) and ATTN_VBATCH 16 by default with the f16 cache (run 97: 30.0 -> 28.5 us).
# Prediction: f16 one row at 8,192 about 23 us with ATTN_WIDE_SPLITS = 32 (run 97: 24.3 with
# ATTN_HEADS 4 at VBATCH 8), depth 128 unchanged (9.3); decode f16 depth 8,192 about 205 tok/s
# against about 227 at 128: -9.7%, target 5 met with the f16 cache.
# 1. Self-check, f32 and f16 caches, ATTN_WIDE_SPLITS = 32 (wide paths compared bit for bit).
# 2. Attention table, one row, depths 128 / 2,048 / 4,096 / 8,192, ATTN_WIDE_SPLITS 0 / 16 / 32.
# 3. Decode BF16 bs=1 depths 128 and 8,192 (N = 3): f16 with 32, f16 with 0, f32 with 32.
# Usage: h200_run98.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nATTN_WIDE_SPLITS = "32"\n' > /tmp/c-w32.toml
printf '[kernel_defines]\nATTN_WIDE_SPLITS = "0"\n' > /tmp/c-w0.toml
ok=1
for kv in f32 f16; do
  step "self-check, $kv cache, ATTN_WIDE_SPLITS = 32"
  timeout 150 $B --config /tmp/c-w32.toml --kv-cache-dtype $kv probe --self-check > "$O/sc-$kv.txt" 2>&1
  grep -E "self-check: |attn_|FAIL|rror" "$O/sc-$kv.txt" | tail -4 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$kv.txt" || ok=0
done
[ $ok = 1 ] || { step "self-check not PASS: no timing"; exit 1; }
for kv in f32 f16; do
  step "attention table, $kv cache"
  timeout 120 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1 --attn-depths 128,2048,4096,8192 \
    --variants ";ATTN_WIDE_SPLITS=16;ATTN_WIDE_SPLITS=32" > "$O/kb-$kv.txt" 2>&1
  grep -E "defines|attn |rror" "$O/kb-$kv.txt" | sed -E 's/kernels, defines \{.*/kernels, next variant/' | cut -c1-110 | tee -a "$L"
done
for run in "f16 w32" "f16 w0" "f32 w32"; do
  set -- $run
  step "decode bf16 bs=1, depth 128 / 8,192, $1 cache, $2"
  timeout 200 $B --backend cuda --config /tmp/c-$2.toml --kv-cache-dtype $1 bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 1 --depth 128,8192 --new-tokens 128 --reps 3 --out "$O/depth.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$1 $2 /" | cut -c1-160 | tee -a "$L"
done
step done
