#!/bin/bash
# Run 141 (prepared in the fortieth session): the attention entries and the board's TTFT, best on
# an H200 (the H200 file's ATTN_TILE entry needs an H200 A/B; run 127's 100.0 ms predates the
# descriptor change), then the wgmma rate probe.
# 1. Green: tile8x2 (ATTN_TILE = 1, ATTN_TILE_ROWS = 8, ATTN_TILE_MINB = 2) (run 139 on an H100:
#    green); each config warmed (compiled) before it is timed.
# 2. BF16 TTFT of 1,024 tokens: ship, tile (16 rows), tile8x2, then the same in reverse.
#    Prediction on an H200: ship 94-97 ms (run 127: 100.0 before the descriptor change; H100
#    -4.2%), tile -1 to -1.5%, tile8x2 a further -0.5 to -1%.
# 3. research/cuda/h200_run138.sh (probe_wgmma_rate, now built for sm_90a), about 10 s.
# Usage: h200_run141.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-540}
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start any
mk ship
mk tile ATTN_TILE=1
mk tile8x2 ATTN_TILE=1 ATTN_TILE_ROWS=8 ATTN_TILE_MINB=2
step "probe_wgmma_rate"
mkdir -p "$O/probe"; bash "$D/h200_run138.sh" "$O/probe" | tail -16 | tee -a "$L"
if green tile8x2; then
  warm bf16 ship tile tile8x2
  ttft bf16 ship tile tile8x2 tile8x2 tile ship
else
  step "tile8x2 not green: no timing"
fi
step done; exit 0
