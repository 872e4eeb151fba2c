#!/bin/bash
# Twenty-fourth session, last device minutes: bs=32 decode with the f16 KV cache now that its
# attention has its loads in flight (run 97: 32 rows at depth 128, 21.2 us against f32's 26.6;
# with 4 heads a block 15.9), for target 3. BF16, depth 128, 128 new tokens, N = 3:
# f32 (shipped), f16, f16 with ATTN_WIDE_ROWS = 32. Prediction: f16 +2-3% over f32 (half the KV
# bytes, 5 us a layer less attention), ATTN_WIDE_ROWS another +2%.
# Usage: h200_run100.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nATTN_WIDE_ROWS = "32"\n' > /tmp/c-wr32.toml
printf '[kernel_defines]\nATTN_WIDE_ROWS = "0"\n' > /tmp/c-wr0.toml
for run in "f32 wr0" "f16 wr0" "f16 wr32"; do
  set -- $run
  step "decode bf16 bs=32, depth 128, $1 cache, $2"
  timeout 120 $B --backend cuda --config /tmp/c-$2.toml --kv-cache-dtype $1 bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 32 --depth 128 --new-tokens 128 --reps 3 --out "$O/bs32.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$1 $2 /" | cut -c1-160 | tee -a "$L"
done
step done
