#!/bin/bash
# Run 128c, after run 128b (H100: ATTN_TILE green but slower: attention 23.3 -> 30.6 ms a prefill,
# TTFT 102.7 -> 109.0). Fewer rows a block (4: 128 registers, 2 blocks an SM; 8: 130, 1 block)
# without a rebuild, then where attn_tile_f32 and attn_rows_f32 stall (one launch each, full
# sections), to decide whether the tiled entry has a future.
# Prediction: 4 rows a block between the two (more warps an SM, a quarter of the K reuse).
# Usage: h200_run128c.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
T="TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_WS_Q=0 ATTN_ROWS=64"
mk tma $T
mk tile $T ATTN_TILE=1
mk tile4 $T ATTN_TILE=1 ATTN_TILE_ROWS=4
mk tile8 $T ATTN_TILE=1 ATTN_TILE_ROWS=8
for c in tile8; do
  step "self-check, f32 cache, config $c"
  timeout 100 $N --config /tmp/c-$c.toml probe --self-check > "$O/sc-$c.txt" 2>&1
  grep -E "self-check: |FAIL|rror" "$O/sc-$c.txt" | tail -3 | cut -c1-200 | tee -a "$L"
done
ttft bf16 tile4 tile8 tma
for k in tile:attn_tile_f32 tma:attn_rows_f32; do
  left $((B - 45)) "ncu $k" || exit 0
  c=${k%%:*}; kn=${k#*:}
  step "ncu $kn (config $c), one launch, full sections"
  timeout 80 ncu --kernel-name "$kn" --launch-skip 8 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section InstructionStats \
    $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
    --out /tmp/x.jsonl > "$O/ncu-$kn.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc|Issued Warp|No Eligible|Bank" "$O/ncu-$kn.txt" | cut -c1-110 | tee -a "$L"
done
step done; exit 0
