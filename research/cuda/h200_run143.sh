#!/bin/bash
# Run 143 (prepared in the forty-first session): H200 only. The attention tile (ATTN_TILE = 1,
# 8 rows, ATTN_TILE_MINB = 2) has been 2.0-2.2% under the shipped prefill on H100s (runs 139,
# 141); the H200 file keeps it off until an H200 measures it. Then the board's TTFT cells.
# 1. green tile8x2 (self-check f32 and f16, CUDA lanes tiny and qwen3).
# 2. BF16 TTFT of 1,024 tokens, ship / tile8x2 / tile8x2 / ship (N = 5; first call of a config
#    compiles: 110 s allowed).
# 3. Q8_0 TTFT, ship, while time lasts.
# Prediction: ship 94-97 ms (run 127's 100.0 predates the descriptor change, -4.2% on an H100),
#   tile8x2 -1.5 to -2.5% against it.
# Usage: h200_run143.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-480}; TT=110
D=$(dirname "$0")
source "$D/run_lib.sh"
run_start h200-only
mk ship
mk tile8x2 ATTN_TILE=1 ATTN_TILE_ROWS=8 ATTN_TILE_MINB=2
green tile8x2 || { step "tile8x2 not green: no timing"; exit 1; }
ttft bf16 ship tile8x2 tile8x2 ship
ttft q8_0 ship
step done; exit 0
