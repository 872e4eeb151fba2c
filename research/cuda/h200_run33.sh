#!/bin/bash
# Prepared in the eighth session for the ninth's first device call (not yet run).
# Since run 32: attention defaults by KV format (f32: positions outer, 8 columns in flight; f16:
# columns outer) and, with the f16 cache, 16-byte key loads (ATTN_KV16W = 1: 8 halves a lane,
# a score order of its own). Predictions (research/cuda-notes.md, eighth session):
#  - kernel table, f16, 1 / 8 rows at 8k: 34.5 / 212 us -> below f32's 30.4 / 165;
#  - decode bs=1 Q8_0 at depth 8,192: f32 223.5 -> about 228 tok/s; f16 above f32, and its
#    depth-128 figure back to f32's (262).
# 0. Self-check with the H200 defaults (printed), f32 and f16 cache; CUDA lane tiny + qwen3.
# 1. Attention table: f32 defaults; f16 defaults, ATTN_KV16W=0, ATTN_KORDER=0.
# 2. Decode Q8_0 bs=1 at depth 128 and 8,192, f32 then f16; bs=1,8,32 at depth 2,048 f32 and f16.
# Usage: h200_run33.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for kv in f32 f16; do
  step "self-check kv $kv"; $B --kv-cache-dtype $kv probe --self-check > "$O/selfcheck-$kv.txt" 2>&1
  grep -E "defines|attn|self-check: |FAIL|rror" "$O/selfcheck-$kv.txt" | tail -5 | cut -c1-220 | tee -a "$L"
done
grep -q "self-check: PASS" "$O/selfcheck-f32.txt" || { step "self-check failed: stop"; exit 0; }
step gates
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
$B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
step "attention tables"
timeout 60 $B probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
  > "$O/kbench-attn-f32.txt" 2>&1
grep -E "defines|attn " "$O/kbench-attn-f32.txt" | cut -c1-100 | tee -a "$L"
timeout 100 $B --kv-cache-dtype f16 probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
  --variants ";ATTN_KV16W=0;ATTN_KORDER=0" > "$O/kbench-attn-f16.txt" 2>&1
grep -E "defines|attn " "$O/kbench-attn-f16.txt" | cut -c1-100 | tee -a "$L"
for kv in f32 f16; do
  step "decode bs=1 depth 128,8192 q8_0 kv $kv"
  timeout 100 $B --backend cuda --kv-cache-dtype $kv bench decode --model synth:llama-3.1-8b:q8_0 \
    --batch 1 --depth 128,8192 --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
for kv in f32 f16; do
  step "decode bs=1,8,32 depth 2048 q8_0 kv $kv"
  timeout 120 $B --backend cuda --kv-cache-dtype $kv bench decode --model synth:llama-3.1-8b:q8_0 \
    --batch 1,8,32 --depth 2048 --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -3 | tee -a "$L"
done
step done
