#!/bin/bash
# Twenty-first session: BF16 bs=32 with TCS_GLU = 1 (run 79: +0.9%, gates green) against the
# gpt-fast recipe in the same call (128 new tokens, depth 128, N = 5), for #7 target 3.
# Prediction: about 4,890 tok/s; gpt-fast about 5,900 (run 72): about 0.83x.
# Usage: h200_run82.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nTCS_GLU = "1"\n' > /tmp/c-glu1.toml
step "BF16 bs=32 TCS_GLU = 1 vs gpt-fast"
timeout 330 $B --backend cuda --config /tmp/c-glu1.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|anchor|rror" | cut -c1-300 | tee -a "$L"
grep -h gpt "$O/bench.jsonl" | grep -oE '"median":[0-9.]+' | sed 's/^/gpt-fast /' | tee -a "$L"
step done
