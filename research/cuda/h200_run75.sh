#!/bin/bash
# Prepared in the nineteenth session (not run): the first device runs of two `memra tune` sweeps
# (#8): the CUDA graph settings (`--what graphs`: cuda_graph_max_batch 0 / 32 by bs=1 decode,
# then cuda_graph_bucket 1 / 8 by a batch shrinking from 32 rows to 1) and the split-K routing
# (`--knobs QTC_SK`: 0, 2, 3 by BF16 bs=32 decode), each on top of the committed H200 defaults,
# written to $OUT (not over the committed file), gated on the qwen3 and tiny gates.
# Prediction: graphs stay on (32; run 45-era bs=1 +12%); bucket 8 kept unless 1 beats it beyond
# the spread: run 73 measured 1 ahead by 2.1% at a constant 20 rows, so 1 is the likely keep;
# QTC_SK 3 kept (run 71: +12.6% over 2).
# Usage: h200_run75.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "tune --what graphs (BF16 8B)"
timeout 280 $B --backend cuda tune --model synth:llama-3.1-8b:bf16 --what graphs --reps 5 --gates cuda-graph \
  --out "$O/graphs.toml" > "$O/tune-graphs.txt" 2>&1
grep -E "cuda_graph|gates run|RED|rror|wrote" "$O/tune-graphs.txt" | cut -c1-200 | tee -a "$L"
step "tune --what kernels --knobs QTC_SK (BF16 8B)"
timeout 280 $B --backend cuda tune --model synth:llama-3.1-8b:bf16 --what kernels --knobs QTC_SK --reps 5 \
  --gates qwen3,tiny --out "$O/qtc_sk.toml" > "$O/tune-sk.txt" 2>&1
grep -E "QTC_SK|gates run|RED|rror|wrote" "$O/tune-sk.txt" | cut -c1-200 | tee -a "$L"
step done
