#!/bin/bash
# Run 139 (prepared in the thirty-ninth session): the next device session's first call, in one
# machine start, most important first.
# 1. TCW_SWP = 1 (kernels/linear_tcw.cu: each BF16 warpgroup's MMAs kept going across units; the
#    producer passes units on by named barriers): green (self-check f32 and f16, CUDA lanes), a
#    hang shows as the self-check's timeout; kernel table at M = 1,024 (ship, SWP, SWP with 6
#    stages); BF16 TTFT of 1,024 tokens ABBA ship / swp.
#    Prediction: BF16 GEMMs 10-30% faster (run 134: the warpgroups wait on their own MMAs and
#    folds, not on the pipe); TTFT 98.7 -> 75-90 ms on an H100.
# 1b. ATTN_TILE_MINB = 2 (two attn_tile_f32 blocks of 8 rows an SM, 128 registers): green, then
#    BF16 TTFT ABBA tile (16 rows, one block an SM) / tile8x2, both on the shipped GEMMs.
#    Prediction: 16 warps an SM hide the shared-memory latency that 8 do not (4.92 cycles an
#    instruction, run 134): attention about 22 -> 16-19 ms, TTFT 1.5-4% under tile's.
# 2. research/cuda/probe_wgmma_rate.cu (h200_run138.sh, ~10 s): the MMAs' own rate.
# 3. As time allows: the split-K descriptor A/B (h200_run137.sh; A = this binary, B = branch
#    tck-desc's).
# Usage: h200_run139.sh MEMRA_A MEMRA_B OUT_DIR   (carry target/memra-a.gz, target/memra-b.gz)
set -u
N=$1; NB0=$2; O=$3; B=560
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
mk swp TCW_SWP=1
if green swp; then
  step "kernel table, M = 1,024, BF16: ship, SWP, SWP at 6 stages"
  timeout 60 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
    --variants ";TCW_SWP=1;TCW_SWP=1,TCW_STAGES=6" > "$O/kbench.txt" 2>&1
  grep -E "^linear |rror" "$O/kbench.txt" | cut -c1-100 | tee -a "$L"
  ttft bf16 ship swp swp ship
else
  step "swp not green: no timing"
fi
mk tile ATTN_TILE=1
mk tile8x2 ATTN_TILE=1 ATTN_TILE_ROWS=8 ATTN_TILE_MINB=2
if green tile8x2; then
  ttft bf16 tile tile8x2 tile8x2 tile
else
  step "tile8x2 not green: no timing"
fi
step "probe_wgmma_rate"
mkdir -p "$O/probe"; bash "$D/h200_run138.sh" "$O/probe" | tail -16 | tee -a "$L"
T=$(( B - ($(date +%s) - t0) ))
if [ $T -gt 200 ]; then
  step "split-K descriptor A/B, $T s"
  mkdir -p "$O/tck"; bash "$D/h200_run137.sh" "${1}" "$NB0" "$O/tck" $((T - 20)) | tail -20
fi
step done; exit 0
