#!/bin/bash
# Twenty-third session: the shipped H200 defaults after run 92 (QTC_GEMM_MIN = 256,
# cuda_graph_max_batch = 64), as a user gets them with no config.
# 1. CUDA lanes tiny and qwen3 (Level A with the new defaults).
# 2. Decode BF16 bs 1 / 32 / 64, depth 128, 128 new tokens (N = 3).
# 3. Serve BF16 c = 64, 128 / 128 tokens (N = 3).
# Prediction: bs=1 and bs=32 unchanged (224.8 / 4,899 in run 84), bs=64 about 5,600 (run 92),
# serve c=64 about 3,600 (run 92).
# Usage: h200_run93.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
ok=1
for g in tiny qwen3; do
  timeout 90 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate is not green: no timing"; exit 1; }
step "decode bf16 bs 1/32/64, shipped defaults"
timeout 150 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32,64 --depth 128 \
  --new-tokens 128 --reps 3 --out "$O/shipped.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-160 | tee -a "$L"
step "serve bf16 c = 64, shipped defaults"
timeout 150 $B --backend cuda bench serve --model synth:llama-3.1-8b:bf16 --concurrency 64 --input-len 128 \
  --new-tokens 128 --reps 3 --out "$O/shipped.jsonl" 2>&1 | grep -E "^serve|rror" | cut -c1-200 | tee -a "$L"
step done
