#!/bin/bash
# Prepared in the ninth session for the tenth's first device call (not yet run).
# 0. Self-check with the f16 cache (ATTN_KV16W now 0 by default) and the CUDA lane, tiny + qwen3.
# 1. gpt_fast_decode.py --check, now in float32 on both sides (run 34's bf16 check could not
#    tell a bug from rounding). Prediction: max |dlogit| / max |logit| below 1e-5, 8 greedy
#    tokens equal (CPU, 2 layers: 4.1e-7).
# 2. BF16 bs=32 against gpt-fast (target 3's anchor; run 34 ran out of time), 128 new tokens.
# 3. Q8_0 decode with the f16 cache at depth 128 / 8,192 (prediction: back to run 32's 244 /
#    227 tok/s; run 33's 247 / 203 had the 16-byte loads).
# 4. Q8_0 decode bs=1, 8, 32 at depth 1,024 (bench decode now prefills once a rep).
# Also stashes target/parts/smol.00 (first half of SmolLM2's Q4_1 file) in /tmp for run 37.
# Usage: h200_run36.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
cp target/parts/smol.00 /tmp/smol.00 2>/dev/null && echo "stashed smol.00" | tee -a "$L"
step "self-check kv f16"; $B --kv-cache-dtype f16 probe --self-check > "$O/selfcheck-f16.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-f16.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck-f16.txt" || { step "self-check failed: stop"; exit 0; }
step gates
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
$B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
step "gpt-fast check in float32, 8B shape"
HF=/tmp/hf8b; timeout 120 $B synth --shape llama-3.1-8b --dtype bf16 --format safetensors --seed 0 --out $HF \
  2>&1 | tail -1 | tee -a "$L"
timeout 240 python3 research/anchors/gpt_fast_decode.py --model "$HF" --depth 128 --new-tokens 8 --reps 1 --check \
  2>&1 | grep -v Loading | tail -2 | tee -a "$L"
step "decode bf16 bs=32 vs gpt-fast"
timeout 200 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 --new-tokens 128 \
  --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "decode q8_0 kv f16 depth 128,8192"
timeout 100 $B --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:q8_0 \
  --batch 1 --depth 128,8192 --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step "decode q8_0 bs=1,8,32 depth 1024"
timeout 120 $B --backend cuda bench decode --model synth:llama-3.1-8b:q8_0 \
  --batch 1,8,32 --depth 1024 --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -3 | tee -a "$L"
step done
