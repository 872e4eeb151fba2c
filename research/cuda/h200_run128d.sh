#!/bin/bash
# Run 128d: where the prefill's two big parts stall, with the shipped H200 file (now TCW_TMA):
# the BF16 wgmma GEMM (first layer's launches) and attention (the rows entry and the tiled one),
# stall reasons per issued instruction and the tensor pipe's activity. No timings.
# Usage: h200_run128d.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-300}
source "$(dirname "$0")/run_lib.sh"
run_start any
T="TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_WS_Q=0"  # explicit: the binary of 02e2135 adds tuned defines one at a time
mk ship $T
mk tile $T ATTN_ROWS=64 ATTN_TILE=1
S='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
P='regex:sm__pipe_tensor_op.*_cycles_active\.avg\.pct_of_peak_sustained_active'
one() {  # one NAME CONFIG KERNEL SKIP COUNT EXTRA...
  local n=$1 c=$2 k=$3 sk=$4 ct=$5; shift 5
  left $((B - 40)) "ncu $n" || return
  step "ncu $n: $k (config $c), skip $sk, count $ct"
  timeout 90 ncu --kernel-name "$k" --launch-skip $sk --launch-count $ct --section SpeedOfLight "$@" \
    $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
    --out /tmp/x.jsonl > "$O/ncu-$n.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|Grid Size|Duration|stalled|pipe_tensor|Compute \(SM\)|Memory Throughput" "$O/ncu-$n.txt" \
    | awk '$NF+0 >= 0.05 || !/stalled/' | cut -c1-120 | tee -a "$L"
}
one gemm ship linear_tcw_bf16 0 5 --section LaunchStats --metrics "$S,$P"
one rows ship attn_rows_f32 8 1 --metrics "$S"
one tile tile attn_tile_f32 8 1 --metrics "$S"
step done; exit 0
