#!/bin/bash
# Thirty-second session, after run 116 (attn_rows_f32 gave the same bits but no time: BF16 TTFT
# 131.5 -> 132.4 ms with 4 rows x 4 heads, 128.1 with 2 x 4, 136.9 with 8 x 2, H100).
# Nsight Compute on the first two launches of attn_paged_f32 (shipped) and attn_rows_f32 (4 x 4)
# in a 1,024-token BF16 prefill: what bounds each (issue, latency, occupancy). Then TTFT with
# 4 x 4 with the key columns outer (ATTN_KORDER = 1: each q column read from shared memory once
# for a lane's 4 positions instead of once a position; same bits) and 2 rows x 2 heads at 2 blocks
# an SM (ATTN_ROWS_MINB = 2, 44 bytes of spill).
# Usage: h200_run117.sh MEMRA OUT_DIR (about 4 minutes; ncu needs a Firecracker machine)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { f=/tmp/c-$1.toml; shift; printf '[kernel_defines]\n' > $f; for kv in "$@"; do printf '%s = "%s"\n' "${kv%%=*}" "${kv#*=}" >> $f; done; }
mk base
mk r44 ATTN_ROWS=64
mk r22m ATTN_ROWS=64 ATTN_ROWS_Q=2 ATTN_ROWS_HEADS=2 ATTN_ROWS_MINB=2
mk r44k ATTN_ROWS=64 ATTN_KORDER=1 ATTN_KUNROLL=4
for c in base:attn_paged r44:attn_rows; do
  step "ncu ${c#*:} (${c%%:*})"
  timeout 150 ncu --clock-control none -k regex:${c#*:} --launch-count 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    $N --backend cuda --config /tmp/c-${c%%:*}.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
    --out /tmp/x.jsonl > "$O/ncu-${c%%:*}.txt" 2> "$O/ncu-${c%%:*}.err"
  grep -E "^  attn_|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Cache|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Stall|Block Limit|Executed Ipc A" \
    "$O/ncu-${c%%:*}.txt" | cut -c1-110 | tee -a "$L"
done
for c in r44k r22m; do
  step "ttft bf16 1024, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
