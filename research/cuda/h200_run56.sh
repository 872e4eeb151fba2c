#!/bin/bash
# Fourteenth session, fifth call: target 3 with its anchor in the same call, as shipped (the
# H200 defaults of this session: QTC_SK = 2 puts the BF16 big matrices' 9..32-token steps on the
# split-K form). BF16 bs=32, 128 new tokens, N = 5, against the gpt-fast recipe (2 alternating
# rounds). Prediction: memra 4,000-4,100 tok/s (run 54: 4,064), gpt-fast 5,900-6,000 (run 45b:
# 5,973): 0.67-0.70x, still short of the target's 1.2x.
# Usage: h200_run56.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "BF16 bs=32 vs gpt-fast"
timeout 330 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|anchor|rror" | cut -c1-300 | tee -a "$L"
step done
