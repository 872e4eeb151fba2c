#!/bin/bash
# Prepared in the twenty-third session (not run): why decode attention over the f16 KV cache is
# slower than over the f32 one although it reads half the bytes (run 87, 1 row, depth 8,192:
# f32 32.7 us = 2.05 TB/s, f16 50.3 us = 0.67 TB/s; no knob helped: KORDER/KUNROLL 52.4, 16-byte
# loads 50.5, 4 heads a block 31.9 at 8,192 but 16.7 at 128). Target 5 (depth 8k within 10% of
# depth 128) needs the f16 form near the f32 form's bandwidth: at 2 TB/s its 33.5 MB a layer
# take 16.4 us, -0.52 ms a token at 8,192 against the f32 cache.
# Nsight Compute on one launch of each attention kernel at depth 8,192, 1 row, both caches:
# speed of light (DRAM, L1, L2 throughput), memory workload, warp stall reasons, occupancy and
# launch statistics (registers, shared memory, blocks). Clocks left alone.
# What to read: if f16's stall reasons are "long scoreboard" with low DRAM throughput, more bytes
# in flight a thread (wider loads, more positions a lane); if "math pipe throttle"/"wait" on the
# conversions, convert pairs (half2 -> float2) or accumulate pairs; if "barrier", fewer
# __syncthreads a split (the max/sum trees); if occupancy is the limit, the shared memory a block.
# Usage: h200_run95.sh MEMRA OUT_DIR (about 4-5 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
# ATTN_V16W = 1 (this session, not yet run): the f16 form's weighted V sum by 16-byte loads of 8
# halves (half the threads), same bits. Self-check with it, then the f16 table against it.
printf '[kernel_defines]\nATTN_V16W = "1"\n' > /tmp/c-v16.toml
step "self-check, f16 cache, ATTN_V16W = 1"
timeout 150 $B --config /tmp/c-v16.toml --kv-cache-dtype f16 probe --self-check > "$O/selfcheck-v16.txt" 2>&1
grep -E "self-check: |attn_|FAIL|rror" "$O/selfcheck-v16.txt" | tail -4 | cut -c1-200 | tee -a "$L"
step "attention table, f16 cache, ATTN_V16W 0 / 1, with ATTN_KV16W 1"
timeout 120 $B --kv-cache-dtype f16 probe --bench-kernels --kernel-ops attn --attn-rows 1,32 --attn-depths 128,2048,8192 \
  --variants ";ATTN_V16W=1;ATTN_V16W=1,ATTN_KV16W=1" > "$O/kbench-attn-v16.txt" 2>&1
grep -E "defines|attn |rror" "$O/kbench-attn-v16.txt" | sed -E 's/kernels, defines \{.*/kernels, next variant/' | cut -c1-110 | tee -a "$L"
for kv in f32 f16; do
  step "ncu, attention, $kv cache, 1 row, depth 8,192"
  timeout 240 ncu --clock-control none -k regex:attn_ --launch-skip 10 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section LaunchStats --section SchedulerStats \
    $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1 --attn-depths 8192 \
    > "$O/ncu-attn-$kv.txt" 2> "$O/ncu-attn-$kv.err"
  grep -E "attn_|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Registers Per|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Issued Warp|No Eligible|Eligible Warps|Grid Size|Block Size" \
    "$O/ncu-attn-$kv.txt" | cut -c1-130 | tee -a "$L"
done
# Occupancy, f32 cache: at depth 8,192 one row's attention is 32 splits x 16 blocks of 256
# threads; at 106 registers a thread an SM holds 2 blocks, so 512 blocks take two waves. Fewer
# registers (ATTN_MINB caps them: 2 -> 128, 4 -> 64) or fewer heads a block (ATTN_HEADS 1: fewer
# accumulators) might fit 4 blocks an SM, one wave. Same bits for ATTN_MINB and ATTN_HEADS;
# ATTN_SPLIT changes the reduction order (a setting of its own).
step "attention table, f32 cache, occupancy variants"
timeout 120 $B probe --bench-kernels --kernel-ops attn --attn-rows 1 --attn-depths 128,2048,8192 \
  --variants ";ATTN_MINB=4;ATTN_HEADS=1;ATTN_HEADS=1,ATTN_MINB=4;ATTN_SPLIT=128,ATTN_MINB=4;ATTN_SPLIT=512" \
  > "$O/kbench-attn-occ.txt" 2>&1
grep -E "defines|attn |rror" "$O/kbench-attn-occ.txt" | sed 's/, LIN_ROWS.*//' | cut -c1-110 | tee -a "$L"
step done
