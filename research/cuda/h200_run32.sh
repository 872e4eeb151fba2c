#!/bin/bash
# Eighth session, last device call. `probe` now takes the device's tuned defaults (before, its
# self-check and kernel tables ran the portable defaults: run 30/31's attention tables were
# ATTN_HEADS = 1, not the H200's 4). f16 loads back to two __half2 (run 31: the hand-split 8-byte
# load was slower).
# 0. Self-check with the H200 defaults (printed), f32 and f16 cache; CUDA lane.
# 1. Attention table at ATTN_HEADS = 4: loop order x register cap, f32 and f16.
# 2. Decode Q8_0 bs=1 at depth 128 and 8,192, f32 and f16 cache.
# Usage: h200_run32.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for kv in f32 f16; do
  step "self-check kv $kv"; $B --kv-cache-dtype $kv probe --self-check > "$O/selfcheck-$kv.txt" 2>&1
  grep -E "defines|attn|self-check: |FAIL|rror" "$O/selfcheck-$kv.txt" | tail -5 | cut -c1-200 | tee -a "$L"
done
grep -q "self-check: PASS" "$O/selfcheck-f32.txt" || { step "self-check failed: stop"; exit 0; }
step gates
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
V="ATTN_KORDER=0,ATTN_KUNROLL=8;ATTN_KORDER=0,ATTN_KUNROLL=8,ATTN_MINB=4;ATTN_KORDER=1;ATTN_KORDER=1,ATTN_MINB=4"
for kv in f32 f16; do
  step "attention table kv $kv"
  timeout 100 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
    --variants "$V" > "$O/kbench-attn-$kv.txt" 2>&1
  grep -E "defines|attn " "$O/kbench-attn-$kv.txt" | cut -c1-100 | tee -a "$L"
done
for kv in f32 f16; do
  step "decode bs=1 depth 128,8192 q8_0 kv $kv"
  timeout 100 $B --backend cuda --kv-cache-dtype $kv bench decode --model synth:llama-3.1-8b:q8_0 \
    --batch 1 --depth 128,8192 --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
step done
