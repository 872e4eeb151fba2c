#!/bin/bash
# Twenty-first session: `memra tune --what kernels --knobs TCS_GLU` on top of the committed H200
# defaults (BF16 8B, bs=32 decode, N = 5), gates qwen3,tiny with the kept set; the written file
# replaces boards/defaults/nvidia-h200.toml if it keeps 1. Prediction: 1 kept (run 79: +0.9%,
# 4,880/4,894 against 4,833/4,850, ranges apart).
# Usage: h200_run83.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "tune --what kernels --knobs TCS_GLU (BF16 8B)"
timeout 330 $B --backend cuda tune --model synth:llama-3.1-8b:bf16 --what kernels --knobs TCS_GLU --reps 5 \
  --gates qwen3,tiny --out "$O/tcs_glu.toml" > "$O/tune-glu.txt" 2>&1
grep -E "TCS_GLU|gates run|RED|rror|wrote" "$O/tune-glu.txt" | cut -c1-200 | tee -a "$L"
step done
