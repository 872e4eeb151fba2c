#!/bin/bash
# Prepared in the ninth session for the tenth's second device call (not yet run).
# 1. Nsight Compute on the batched integer kernel at M = 32 (Q8_0 gate+up, 263 us against 30 us
#    of weight reads; run 35 showed prefill, which runs it in 32-token slabs, 5x behind
#    llama.cpp): what bounds it (issue, L2, shared memory, occupancy).
# 2. Kernel table at M = 32, 64, 128, 256 for Q8_0 and Q4_K (how the cost grows past one slab).
# 3. `memra tune --what spec` on the 8B Q8_0: the H200's spec_row_cost (the file still holds the
#    CPU's 0.12) and the concurrency where speculation stops paying.
# Usage: h200_run37.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "ncu linear_imma_q8_0_n4 at M = 32"
timeout 150 ncu --clock-control none --kernel-name regex:linear_imma_q8_0 --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  $B probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 32 > "$O/ncu-imma.txt" 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)|Stall|L1/TEX Hit|L2 Hit|Block Limit|Issue Slots|Executed Ipc" "$O/ncu-imma.txt" | head -30 | tee -a "$L"
step "kernel table M = 32..256"
timeout 150 $B probe --bench-kernels --kernel-dtypes q8_0,q4_k --kernel-tokens 1,32,64,128,256 > "$O/kbench-lin.txt" 2>&1
grep -E "defines|q8_0|q4_k" "$O/kbench-lin.txt" | cut -c1-110 | tee -a "$L"
step "tune spec, 8B q8_0"
timeout 240 $B --backend cuda tune --model synth:llama-3.1-8b:q8_0 --what spec --reps 3 --gates none \
  --out "$O/h200-spec.toml" 2>&1 | tail -12 | tee -a "$L"
step done
