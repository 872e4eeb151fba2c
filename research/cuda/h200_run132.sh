#!/bin/bash
# Run 132 (branch tcw-pp, prepared in the thirty-eighth session): TCW_PP = 1, the two BF16
# warpgroups taking turns at the tensor pipe (named barriers 1 and 2; kernels/linear_tcw.cu).
# Run 128d (H100, qkv at M = 1,024): tensor pipe active 38.5%; stalls wait 1.39, no instruction
# 1.32 a issued instruction: both warpgroups wait for their MMAs and fold at the same time.
# 1. Green: self-check f32 and f16, CUDA lanes, with TCW_PP = 1 over the H200 file.
# 2. Kernel table at M = 1,024, BF16: ship / TCW_PP.
# 3. BF16 TTFT of 1,024 tokens, ABBA ship / pp.
# Prediction: BF16 gate+up and down 15-30% faster (tensor activity 38% -> 50-55%); TTFT 102.6 ->
# 85-92 ms on an H100. If it hangs (a named barrier's count wrong), the self-check's timeout says so.
# Usage: h200_run132.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk ship
mk pp TCW_PP=1
green pp || { step "pp not green: no timing"; exit 1; }
step "kernel table, M = 1,024, BF16"
timeout 60 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
  --variants ";TCW_PP=1" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | cut -c1-120 | tee -a "$L"
ttft bf16 ship pp pp ship
step done; exit 0
