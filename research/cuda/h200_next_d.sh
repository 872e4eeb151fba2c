#!/bin/bash
# Prepared in the sixth session (not yet run): target 3's serving report, c = 1..64 through
# `memra serve` (closed loop, 128-token prompts, 128 new tokens) on the 8B BF16 shape with the
# tensor-core kernels (QTC=1), and with the default kernels up to c = 8 (they run M > 1 at
# CUDA-core speed).
# Usage: h200_next_d.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
step "serve QTC=1 c=1..64"
$B --backend cuda --config /tmp/tc.toml bench serve --model synth:llama-3.1-8b:bf16 --concurrency 1,2,4,8,16,32,64 \
  --input-len 128 --new-tokens 128 --reps 3 --out "$O/bench.jsonl" > "$O/serve-qtc.txt" 2>&1; tail -25 "$O/serve-qtc.txt" | tee -a "$L"
step "serve defaults c=1..8"
$B --backend cuda bench serve --model synth:llama-3.1-8b:bf16 --concurrency 1,2,4,8 \
  --input-len 128 --new-tokens 128 --reps 3 --out "$O/bench.jsonl" > "$O/serve.txt" 2>&1; tail -15 "$O/serve.txt" | tee -a "$L"
step done
