#!/bin/bash
# Twenty-sixth session. Run 102's shipped-defaults bs=32 (f16 cache) gave 5,150 / 5,148 tok/s
# against run 101's 5,270 (binary ef4a33a, another machine and day). Between the two binaries
# the shipped path changed in two ways, both meant to change no bits and no speed: the split-K
# entries take 8 more (unused) arguments, and the reduce kernels' element bodies moved into
# shared helpers (linear_tcs_reduce4 56 -> 54 registers). A/B in one call: both binaries,
# interleaved, 2 rounds, N = 3 each, BF16 bs=32 depth 128, 128 new tokens, f16 cache.
# Prediction: within the spread (the drop is the machine), else a regression to find.
# Usage: h200_run104.sh OLD_MEMRA NEW_MEMRA OUT_DIR (about 4 minutes)
set -u
A=$1; N=$2; O=$3; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then B=$A; else B=$N; fi
    step "decode bf16 bs=32, depth 128, f16 cache, $side, round $round"
    timeout 110 $B --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
      --depth 128 --new-tokens 128 --reps 3 --out "$O/decode-$side.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$side /" | cut -c1-160 | tee -a "$L"
  done
done
step done
