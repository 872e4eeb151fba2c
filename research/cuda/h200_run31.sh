#!/bin/bash
# Eighth session, fourth device call: why the restructured attention (run 30) is slower with
# many rows and with the f16 cache. Nsight Compute on attn_split_f32 (8 rows at depth 8,192,
# f32 and f16 cache), then the attention table over loop order, unroll and register caps.
# Usage: h200_run31.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for kv in f32 f16; do
  step "ncu attn_split_f32 kv $kv"
  timeout 120 ncu --clock-control none --kernel-name attn_split_f32 --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis \
    $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 8 --attn-depths 8192 \
    > "$O/ncu-$kv.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)|Stall|L1/TEX Hit|L2 Hit|Block Limit" "$O/ncu-$kv.txt" | head -30 | tee -a "$L"
done
V="ATTN_KORDER=0,ATTN_KUNROLL=8;ATTN_KORDER=0,ATTN_KUNROLL=8,ATTN_MINB=4;ATTN_KORDER=1,ATTN_MINB=2;ATTN_KORDER=1,ATTN_MINB=4;ATTN_KORDER=1,ATTN_KUNROLL=2,ATTN_MINB=4"
for kv in f32 f16; do
  step "attention table kv $kv"
  timeout 150 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1,8,32 --attn-depths 2048,8192 \
    --variants "$V" > "$O/kbench-attn-$kv.txt" 2>&1
  grep -E "defines|attn " "$O/kbench-attn-$kv.txt" | tee -a "$L"
done
step done
