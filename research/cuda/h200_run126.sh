#!/bin/bash
# Thirty-sixth session, after run 125 (H100: TCW_WS green but 1.84x slower; not for the H200).
# H200 only: the two H100-measured prefill settings, each as an ABBA in one call, for
# boards/defaults/nvidia-h200.toml.
# 1. Green check with both on (self-check f32 + f16 cache, CUDA lanes tiny and qwen3).
# 2. ATTN_ROWS = 64: BF16 TTFT of 1,024 tokens, ABBA (runs 119-125: -16.8% on H100s).
# 3. TCW_UPB_Q = 2: Q8_0 TTFT, ABBA (runs 123-125: Q8_0 GEMM -10% at M = 1,024 on H100s).
# 4. Kernel table at M = 1,024 (base / TCW_UPB_Q = 2), Q8_0 and BF16.
# Predictions: ATTN_ROWS 127.8 -> 105-110 ms; TCW_UPB_Q Q8_0 TTFT -5 to -8%.
# Usage: h200_run126.sh MEMRA OUT_DIR [SECONDS] (about 6 minutes)
set -u
N=$1; O=$2; B=${3:-540}
source "$(dirname "$0")/run_lib.sh"
run_start h200-only
mk base
mk rows ATTN_ROWS=64
mk uq2 TCW_UPB_Q=2
mk both ATTN_ROWS=64 TCW_UPB_Q=2
green both || { step "not green: no timing"; exit 1; }
ttft bf16 base rows rows base
ttft q8_0 base uq2 uq2 base
left $((B - 40)) "kernel table" || exit 0
step "kernel table, M = 1,024"
timeout 60 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0 --kernel-shapes q/o,qkv,gate+up,down \
  --variants "TCW_UPB_Q=1;TCW_UPB_Q=2" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | cut -c1-120 | tee -a "$L"
step done; exit 0
