#!/bin/bash
# Device call B of two (right after h200_run11.sh, same warm machine): the anchors of issue 7
# beside memra on the same random weights. bs=1, depth 128, 256 new tokens, N = 5: llama.cpp
# (llama-bench built by call A) for BF16, Q8_0, Q4_K; the gpt-fast recipe for BF16. HF eager is
# left out here (10.1 tok/s measured before; 256 tokens x 6 runs would take about 150 s).
# Usage: h200_run12.sh MEMRA OUT_DIR [CONFIG]
set -u
B=$1; O=$2; C=${3:-}; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
LB=$PWD/target/lcpp/build/bin/llama-bench
[ -x "$LB" ] || echo "no llama-bench at $LB" | tee -a "$L"
cfg=(); [ -n "$C" ] && cfg=(--config "$C")
for d in q8_0 q4_k bf16; do
  vs=llama.cpp; [ "$d" = bf16 ] && vs=llama.cpp,gpt-fast
  step "decode bs=1 depth 128 $d vs $vs"
  $B --backend cuda "${cfg[@]}" bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 \
    --reps 5 --vs $vs --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 | tail -4 | tee -a "$L"
done
step done
