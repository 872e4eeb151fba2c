#!/bin/bash
# Run 133 (thirty-ninth session, branch tcw-pp): runs 131 and 132 folded into one call's worth.
# 1. Green with TCW_PP = 1 and ATTN_TILE = 1 together (the two touch different kernels: the BF16
#    wgmma GEMM and the prefill attention), over the H200 file.
# 2. Kernel table at M = 1,024, BF16: ship / TCW_PP.
# 3. BF16 TTFT of 1,024 tokens: ship pp both both pp ship.
# Predictions (run 132's): BF16 gate+up and down 15-30% faster; TTFT 102.6 -> 85-92 ms on an
# H100 with pp; both: about 1.3 ms below pp (run 129-130's tile gain).
# Usage: h200_run133.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk ship
mk pp TCW_PP=1
mk both TCW_PP=1 ATTN_TILE=1
green both || { step "both not green: no timing"; exit 1; }
step "kernel table, M = 1,024, BF16"
timeout 60 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
  --variants ";TCW_PP=1" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | cut -c1-120 | tee -a "$L"
ttft bf16 ship pp both both pp ship
step done; exit 0
