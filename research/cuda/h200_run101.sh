#!/bin/bash
# Prepared in the twenty-fourth session (not run). Next device session, first call.
# 1. The shipped defaults as a user gets them: self-check with the f32 and the f16 cache (the
#    attention check now has a row at position 2,303, 9 splits: the combine's batch of 8; the
#    wide entries under ATTN_WIDE_SPLITS / ATTN_WIDE_ROWS_F16), CUDA lanes tiny and qwen3.
# 2. Nsight Compute on the linear kernels of a BF16 bs=32 step (M = 32): o (q/o [4096, 4096], the
#    one-token form `linear_tc_bf16_n4`, 17.9 us = 1.9 TB/s), qkv and down (wgmma split-K).
#    Hypothesis: the one-token form at M = 32 is bound by L2 -> SM traffic, not DRAM: each of its
#    128 blocks (2 row tiles, 16 K slices) reads all of x (32 tokens x 4,096 x 4 B = 512 KB), 64
#    MB in all against 33.5 MB of weights. If ncu shows L2 throughput near its peak and DRAM
#    below 50%, the next form shares x across a thread-block cluster (TMA multicast or
#    distributed shared memory), cutting that traffic by the cluster size.
# 3. Decode BF16 bs=32 with the f16 cache (shipped ATTN_WIDE_ROWS_F16 = 32; run 100: 5,192).
# Usage: h200_run101.sh MEMRA OUT_DIR (about 4 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
ok=1
for kv in f32 f16; do
  step "self-check, $kv cache, shipped defaults"
  timeout 150 $B --kv-cache-dtype $kv probe --self-check > "$O/sc-$kv.txt" 2>&1
  grep -E "self-check: |attn_paged|FAIL|rror" "$O/sc-$kv.txt" | tail -4 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$kv.txt" || ok=0
done
for g in tiny qwen3; do
  timeout 90 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate or the self-check is not green: no timing"; exit 1; }
for shape in q/o qkv down; do
  f=$(echo $shape | tr / _)
  step "ncu, linear kernels at M = 32, $shape"
  timeout 120 ncu --clock-control none -k regex:linear_tc --launch-skip 6 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    $B probe --bench-kernels --kernel-tokens 32 --kernel-dtypes bf16 --kernel-shapes $shape \
    > "$O/ncu-$f.txt" 2> "$O/ncu-$f.err"
  grep -E "  linear_tc|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Memory Throughput|L2 Hit|Grid Size|Registers Per" \
    "$O/ncu-$f.txt" | cut -c1-120 | tee -a "$L"
done
step "decode bf16 bs=32, depth 128, f16 cache, shipped defaults"
timeout 120 $B --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 3 --out "$O/bs32.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-160 | tee -a "$L"
step done
