#!/bin/bash
# Prepared in the ninth session for the tenth's second device call (not yet run).
# 1. Nsight Compute on the batched integer kernel at M = 32 (Q8_0 gate+up, 263 us against 30 us
#    of weight reads; run 35 showed prefill, which runs it in 32-token slabs, 5x behind
#    llama.cpp): what bounds it (issue, L2, shared memory, occupancy).
# 2. Kernel table at M = 32, 64, 128, 256 for Q8_0 and Q4_K (how the cost grows past one slab).
# 3. `memra tune --what spec` on the 8B Q8_0: the H200's spec_row_cost (the file still holds the
#    CPU's 0.12) and the concurrency where speculation stops paying.
# 4. The design question of target 4 (cuda-notes, ninth session): one tensor-core kernel family
#    for every M with x rounded to bf16 once (QTC=1, QTC_XSPLIT=1) against three parts (QTC=1):
#    BF16 kernel table at M = 1 and 1,024, and the 1,024-token BF16 TTFT with each (run 21: 315
#    ms with three parts). Prediction: XSPLIT=1 cuts the MMA work 3x, but the TC kernel re-reads
#    the weights once per 32-token group (grid: row tiles fastest), so TTFT stays above 120 ms;
#    with QTC_TOKFAST=1 (token groups fastest, new, compile-tested only) the re-reads come from L2
#    and TTFT falls further, toward the MMA issue rate.
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
step "QTC x parts and grid order: self-check, BF16 kernel table, TTFT"
printf '[kernel_defines]\nQTC = "1"\nQTC_XSPLIT = "1"\nQTC_TOKFAST = "1"\n' > /tmp/qtc1t.toml
$B --config /tmp/qtc1t.toml probe --self-check > "$O/selfcheck-qtc1t.txt" 2>&1
grep -E "self-check: |FAIL" "$O/selfcheck-qtc1t.txt" | tail -3 | cut -c1-200 | tee -a "$L"
timeout 150 $B probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,1024 \
  --variants "QTC=1;QTC=1,QTC_XSPLIT=1;QTC=1,QTC_XSPLIT=1,QTC_TOKFAST=1" > "$O/kbench-qtc.txt" 2>&1
grep -E "defines|bf16" "$O/kbench-qtc.txt" | cut -c1-110 | tee -a "$L"
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/qtc3.toml
printf '[kernel_defines]\nQTC = "1"\nQTC_XSPLIT = "1"\n' > /tmp/qtc1.toml
for c in qtc3 qtc1 qtc1t; do
  timeout 90 $B --backend cuda --config /tmp/$c.toml bench ttft --model synth:llama-3.1-8b:bf16 \
    --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
