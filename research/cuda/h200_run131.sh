#!/bin/bash
# Run 131 (prepared in the thirty-eighth session). Any card; the H200 A/B only counts on an H200.
# 1. attn_tile_f32's stall reasons by source line: one launch (layer 8), WarpStateStats and
#    SourceCounters, nothing else in the ncu call (runs 128d and 129 ran past their timeouts with
#    more metrics). By count a split costs about 32 K FFMA cycles, 11 K of exposed L2 latency and
#    a few K of softmax; it measures about 140 K (runs 128c-130, H100). The top stall lines
#    decide the next change: the staging (barrier / long scoreboard at the chunk loads), the
#    softmax (short scoreboard at the shuffles), or the K loop (MIO throttle).
# 2. BF16 TTFT of 1,024 tokens, ABBA ship / tile (ATTN_TILE = 1); H100: 102.6 -> 101.4 (-1.3%).
#    On an H200 this decides the H200 file's ATTN_TILE entry.
# Usage: h200_run131.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk ship
mk tile ATTN_TILE=1
green tile || { step "tile not green: no timing"; exit 1; }
step "ncu attn_tile_f32: warp states and source counters, one launch"
timeout 150 ncu --kernel-name attn_tile_f32 --launch-skip 8 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --print-details all \
  $N --backend cuda --config /tmp/c-tile.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
  --out /tmp/x.jsonl > "$O/ncu-tile-src.txt" 2>&1
grep -E "Stall|stall|Warp Cycles|Location|0x[0-9a-f]+ " "$O/ncu-tile-src.txt" | head -40 | cut -c1-140 | tee -a "$L"
sleep 5  # the profiled process's memory back before the timings
ttft bf16 ship tile tile ship
step done; exit 0
