#!/bin/bash
# Run 134 (thirty-ninth session, branch tcw-pp): the profiles behind runs 131 and 133.
# 1. wgmma GEMM with TCW_PP = 1 (first 5 launches of a 1,024-token prefill: layer 0's qkv, o,
#    gate+up, down, layer 1's qkv): tensor pipe activity and stalls a issued instruction, against
#    run 128d's 38.5% (qkv) without it.
# 2. attn_tile_f32's stall reasons by source line (run 131's step 1): one launch (layer 8),
#    WarpStateStats and SourceCounters only.
# Usage: h200_run134.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk pp TCW_PP=1
mk tile ATTN_TILE=1
S='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
P='regex:sm__pipe_tensor_op.*_cycles_active\.avg\.pct_of_peak_sustained_active'
step "ncu gemm, TCW_PP = 1"
timeout 100 ncu --kernel-name linear_tcw_bf16 --launch-skip 0 --launch-count 5 --section SpeedOfLight --metrics "$S,$P" \
  $N --backend cuda --config /tmp/c-pp.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
  --out /tmp/x.jsonl > "$O/ncu-gemm-pp.txt" 2>&1
grep -E "^  [a-z_]+.*\(|Duration|stalled|pipe_tensor" "$O/ncu-gemm-pp.txt" \
  | awk '$NF+0 >= 0.05 || !/stalled/' | cut -c1-120 | tee -a "$L"
sleep 3
left $((B - 160)) "ncu tile" || exit 0
step "ncu attn_tile_f32: warp states and source counters, one launch"
timeout 150 ncu --kernel-name attn_tile_f32 --launch-skip 8 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --print-details all \
  $N --backend cuda --config /tmp/c-tile.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
  --out /tmp/x.jsonl > "$O/ncu-tile-src.txt" 2>&1
grep -E "Stall|stall|Warp Cycles|Location|0x[0-9a-f]+ " "$O/ncu-tile-src.txt" | head -40 | cut -c1-140 | tee -a "$L"
step done; exit 0
