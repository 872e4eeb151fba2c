#!/bin/bash
# Eighth session, third device call: the attention kernel restructured (the split's slots in
# shared memory once; score loop columns outer, positions inner, branch-free loads; ATTN_KUNROLL).
# 0. Self-check (defaults now ATTN_HEADS = 4) with the f32 and the f16 cache; CUDA lane.
# 1. Attention table: the run-29 binary (OLD) against this one, ATTN_KUNROLL 2/4/8, ATTN_SPLIT 128.
# 2. Decode Q8_0 bs=1 at depth 128 and 8,192 (f32, f16 KV); bs=1,8,32 at depth 2,048 f16.
# Usage: h200_run30.sh MEMRA OLD_MEMRA OUT_DIR
set -u
B=$1; OLD=$2; O=$3; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for kv in f32 f16; do
  step "self-check kv $kv"; $B --kv-cache-dtype $kv probe --self-check > "$O/selfcheck-$kv.txt" 2>&1
  grep -E "attn|self-check|FAIL|rror" "$O/selfcheck-$kv.txt" | tail -4 | tee -a "$L"
done
grep -q "self-check: PASS" "$O/selfcheck-f32.txt" || { step "self-check failed: stop"; exit 0; }
step gates
$B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step "attention kernels"
for kv in f32 f16; do
  K=""; [ $kv = f16 ] && K=",KV_F16=1"
  timeout 60 $OLD probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
    --variants "ATTN_HEADS=4$K" > "$O/kbench-attn-old-$kv.txt" 2>&1
  grep -E "defines|attn " "$O/kbench-attn-old-$kv.txt" | sed 's/^/OLD /' | tee -a "$L"
  timeout 150 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
    --variants "ATTN_KUNROLL=2;ATTN_KUNROLL=4;ATTN_KUNROLL=8;ATTN_SPLIT=128" > "$O/kbench-attn-$kv.txt" 2>&1
  grep -E "defines|attn " "$O/kbench-attn-$kv.txt" | tee -a "$L"
done
for kv in f32 f16; do
  step "decode bs=1 depth 128,8192 q8_0 kv $kv"
  timeout 150 $B --backend cuda --kv-cache-dtype $kv bench decode --model synth:llama-3.1-8b:q8_0 \
    --batch 1 --depth 128,8192 --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
step done
