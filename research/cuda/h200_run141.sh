#!/bin/bash
# Run 141 (prepared in the fortieth session): best on an H200 (the H200 file's ATTN_TILE entry
# needs an H200 A/B; run 127's 100.0 ms predates the descriptor change); any card otherwise.
# 1. research/cuda/h200_run138.sh (probe_wgmma_rate, now built for sm_90a), about 10 s.
# 2. TCW_N128 (m64n128k16: 4 HGMMA a unit and warpgroup instead of 8, one wait a unit): green,
#    kernel table at M = 1,024 (BF16, Q8_0; ship / N128).
#    Prediction: from the probe's n128 row against fold; without it, -5 to +10% (fewer
#    instructions, but half 0's fold no longer overlaps half 1's MMAs in the same warpgroup).
# 3. tile8x2 (ATTN_TILE = 1, 8 rows, ATTN_TILE_MINB = 2; green on an H100 in run 139): green.
# 4. BF16 TTFT of 1,024 tokens: ship, n128, tile8x2, both, then back, while time lasts (each
#    config's first call also compiles: 110 s allowed a call).
#    Prediction on an H200: ship 94-97 ms (run 127: 100.0 before the descriptor change; H100
#    -4.2%), tile8x2 -2% against ship.
# Usage: h200_run141.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-480}; TT=110
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
mk n128 TCW_N128=1
mk tile8x2 ATTN_TILE=1 ATTN_TILE_ROWS=8 ATTN_TILE_MINB=2
mk both TCW_N128=1 ATTN_TILE=1 ATTN_TILE_ROWS=8 ATTN_TILE_MINB=2
step "probe_wgmma_rate"
mkdir -p "$O/probe"; bash "$D/h200_run138.sh" "$O/probe" | tail -16 | tee -a "$L"
step "kernel table, M = 32, BF16: ship, TCK_MIN_MB = 0 (q/o on the split-K form; run 142's 2b)"
timeout 60 $N probe --bench-kernels --kernel-tokens 32 --kernel-dtypes bf16 --kernel-shapes q/o,qkv \
  --variants ";TCK_MIN_MB=0" > "$O/kbench32.txt" 2>&1
grep -E "^linear |rror" "$O/kbench32.txt" | cut -c1-100 | tee -a "$L"
T="ship"
if green n128; then
  step "kernel table, M = 1,024: ship, TCW_N128"
  timeout 90 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0 --kernel-shapes q/o,qkv,gate+up,down \
    --variants ";TCW_N128=1" > "$O/kbench.txt" 2>&1
  grep -E "^linear |rror" "$O/kbench.txt" | cut -c1-100 | tee -a "$L"
  T="$T n128"
else
  step "n128 not green: no timing"
fi
if green tile8x2; then T="$T tile8x2"; [ "${T#*n128}" != "$T" ] && T="$T both"; fi
ttft bf16 $T $(echo $T | tr ' ' '\n' | tac | tr '\n' ' ')
step done; exit 0
