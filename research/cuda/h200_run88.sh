#!/bin/bash
# Twenty-second session: ATTN_PF = 1 (decode attention prefetches each position's K and V rows
# into L2 once its cache slot is known; same bits). Run 87: attention alone, 1 row, 8B heads,
# f32 cache 9.9 / 14.1 / 32.7 us at depths 128 / 2,048 / 8,192 (48% of copy bandwidth at
# 8,192), f16 14.6 / 24.0 / 50.3 (16%): latency-bound, the V loads wait for the softmax.
# 1. Self-check with ATTN_PF = 1 (attention rows against the CPU reference) and the tiny lane.
# 2. Attention table, f32 and f16 caches, ATTN_PF 0 / 1, and 1 with ATTN_HEADS 4.
# 3. BF16 bs=1 depth 128 / 8,192, f32 cache, ATTN_PF 0 / 1 (N = 5); BF16 bs=32 ATTN_PF 0 / 1.
# Prediction: the V round trip becomes an L2 hit: depth 8,192 f32 32.7 -> about 25 us (2.7
# TB/s), depth 128 9.9 -> about 8 us; bs=1 depth 8,192 195 -> about 205 tok/s (target 5: -9%),
# depth 128 +1%; bs=32 +2% (attention about 0.8 ms of a 6.5 ms step).
# Usage: h200_run88.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nATTN_PF = "1"\n' > /tmp/c-pf1.toml
printf '[kernel_defines]\nATTN_PF = "0"\n' > /tmp/c-pf0.toml
step "self-check, ATTN_PF = 1"
timeout 120 $B --config /tmp/c-pf1.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |attn|FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
timeout 90 $B --config /tmp/c-pf1.toml gate --lane cuda --only tiny > "$O/gates-tiny.txt" 2>&1
echo "CUDA lane tiny, ATTN_PF = 1: $(grep -E "gates run" "$O/gates-tiny.txt" | head -1)" | tee -a "$L"
grep -q " 0 failed" "$O/gates-tiny.txt" || { step "a gate is not green: no timing"; exit 1; }
for kv in f32 f16; do
  step "attention, $kv cache"
  timeout 90 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 128,2048,8192 \
    --variants "ATTN_PF=0;ATTN_PF=1;ATTN_PF=1,ATTN_HEADS=4" > "$O/kbench-attn-$kv.txt" 2>&1
  grep -E "defines|attn |rror" "$O/kbench-attn-$kv.txt" | sed 's/, LIN_ROWS.*//' | cut -c1-100 | tee -a "$L"
done
step "BF16 bs=1 depth 128/8192 ATTN_PF 0 / 1 (N = 5)"
for c in pf0 pf1; do
  timeout 100 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128,8192 \
    --new-tokens 128 --reps 5 --out "$O/pf.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step "BF16 bs=32 ATTN_PF 0 / 1 (N = 5)"
for c in pf0 pf1; do
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/pf.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
