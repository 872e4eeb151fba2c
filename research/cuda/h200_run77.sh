#!/bin/bash
# Run 76's comparison again, each process held to 45% of device memory (run 76's --against
# child found the parent's KV cache reservation holding the device: out of memory), and ATTN_HEADS
# 2 (the default) against 4 at bs=32 with the new binary, interleaved (run 76: 4 gave 4,806.6).
# Usage: h200_run77.sh NEW OLD OUT_DIR REF
set -u
B=$1; A=$2; O=$3; REF=$4; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "bench --compare, new vs old interleaved, --gpu-memory-utilization 0.45 each"
timeout 300 $B --backend cuda --gpu-memory-utilization 0.45 bench decode --model synth:llama-3.1-8b:bf16 --compare "$REF" \
  --against "$A" --reps 5 --out "$O/compare.jsonl" > "$O/compare.txt" 2>&1
echo "rc $?" >> "$O/compare.txt"
grep -vE "INFO|WARN" "$O/compare.txt" | tail -8 | cut -c1-220 | tee -a "$L"
step "bs=32: ATTN_HEADS 2 / 4 / 2 / 4 (new binary, N = 3 each)"
printf '[kernel_defines]\nATTN_HEADS = "4"\n' > /tmp/c-ah4.toml
printf '[kernel_defines]\nATTN_HEADS = "2"\n' > /tmp/c-ah2.toml
for c in ah2 ah4 ah2 ah4; do
  timeout 60 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 3 --out "$O/attn.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-200 | tee -a "$L"
done
step done
