#!/bin/bash
# Seventh session, call 4 (run 26), run as one inline command (recorded here): `bench serve`
# c = 1, 8, 32, 64 with the tensor-core kernels (QTC=1) on the BF16 8B shape, then bs=1 BF16
# decode at depth 128 and 8,192 (this second part ran past its 120 s limit: the 8k prefill on
# the float kernels).
# Usage: h200_run26.sh MEMRA OUT_DIR
B=$1; O=$2
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
t0=$(date +%s)
echo "== serve QTC=1" | tee -a $O/log.txt
timeout 250 $B --backend cuda --config /tmp/tc.toml bench serve --model synth:llama-3.1-8b:bf16 --concurrency 1,8,32,64 \
  --input-len 128 --new-tokens 128 --reps 3 --out $O/bench.jsonl > $O/serve-qtc.txt 2>&1
tail -16 $O/serve-qtc.txt
echo "== [$(( $(date +%s) - t0 )) s] bf16 depth"
timeout 120 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128,8192 --new-tokens 256 \
  --reps 3 --out $O/bench.jsonl 2>&1 | tail -2
echo "== [$(( $(date +%s) - t0 )) s] done"
