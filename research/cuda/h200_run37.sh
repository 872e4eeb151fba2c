#!/bin/bash
# Prepared in the ninth session for the tenth's second device call (not yet run).
# 1. Nsight Compute on the batched integer kernel at M = 32 (Q8_0 gate+up, 263 us against 30 us
#    of weight reads; run 35 showed prefill, which runs it in 32-token slabs, 5x behind
#    llama.cpp): what bounds it (issue, L2, shared memory, occupancy).
# 2. Kernel table at M = 32, 64, 128, 256 for Q8_0 and Q4_K (how the cost grows past one slab).
# 3. (moved to run 38's full tune, which sweeps speculation too.)
# 4. The design question of target 4 (cuda-notes, ninth session): one tensor-core kernel family
#    for every M with x rounded to bf16 once (QTC=1, QTC_XSPLIT=1) against three parts (QTC=1):
#    BF16 kernel table at M = 1 and 1,024, and the 1,024-token BF16 TTFT with each (run 21: 315
#    ms with three parts). Prediction: XSPLIT=1 cuts the MMA work 3x, but the TC kernel re-reads
#    the weights once per 32-token group (grid: row tiles fastest), so TTFT stays above 120 ms;
#    with QTC_TOKFAST=1 (token groups fastest, new, compile-tested only) the re-reads come from L2
#    and TTFT falls further, toward the MMA issue rate.
# 0. First, #5 on the GPU: SmolLM2-135M (Q4_1 joined from /tmp/smol.00, stashed by run 36, and
#    target/parts/smol.01, checked by sha256, re-quantized to Q8_0), `bench spec` n-gram K = 4, 8
#    over every prompt of the three classes, 128 new tokens and to end-of-sequence, with the
#    drafter of the ninth session (run 24 had one prompt per class and the old drafter).
# Usage: h200_run37.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
SM=/tmp/smol-q4_1.gguf
if cat /tmp/smol.00 target/parts/smol.01 > $SM 2>/dev/null && \
   echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $SM" | sha256sum -c - | tee -a "$L"; then
  $B quantize $SM /tmp/smol-q8_0.gguf --force | tee -a "$L"
  step "spec smol q8_0, 128 new tokens"
  timeout 100 $B --backend cuda bench spec --model /tmp/smol-q8_0.gguf --method ngram --k 4,8 --reps 3 \
    --new-tokens 128 --out "$O/bench.jsonl" 2>&1 | tail -7 | cut -c1-230 | tee -a "$L"
  step "spec smol q8_0, to end-of-sequence"
  timeout 100 $B --backend cuda bench spec --model /tmp/smol-q8_0.gguf --method ngram --k 4,8 --reps 3 \
    --new-tokens 256 --stop-at-eos --out "$O/bench.jsonl" 2>&1 | tail -7 | cut -c1-230 | tee -a "$L"
else
  step "smol parts missing: spec skipped"
fi
step "QTC x parts and grid order: self-check, BF16 kernel table, TTFT"
printf '[kernel_defines]\nQTC = "1"\nQTC_XSPLIT = "1"\nQTC_TOKFAST = "1"\n' > /tmp/qtc1t.toml
timeout 90 $B --config /tmp/qtc1t.toml probe --self-check > "$O/selfcheck-qtc1t.txt" 2>&1
grep -E "self-check: |FAIL" "$O/selfcheck-qtc1t.txt" | tail -3 | cut -c1-200 | tee -a "$L"
timeout 120 $B probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,1024 \
  --variants "QTC=1;QTC=1,QTC_XSPLIT=1;QTC=1,QTC_XSPLIT=1,QTC_TOKFAST=1" > "$O/kbench-qtc.txt" 2>&1
grep -E "defines|bf16" "$O/kbench-qtc.txt" | cut -c1-110 | tee -a "$L"
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/qtc3.toml
printf '[kernel_defines]\nQTC = "1"\nQTC_XSPLIT = "1"\n' > /tmp/qtc1.toml
for c in qtc3 qtc1 qtc1t; do
  timeout 60 $B --backend cuda --config /tmp/$c.toml bench ttft --model synth:llama-3.1-8b:bf16 \
    --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "ncu linear_imma_q8_0_n4 at M = 32"
timeout 120 ncu --clock-control none --kernel-name regex:linear_imma_q8_0 --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  $B probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 32 > "$O/ncu-imma.txt" 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)|Stall|L1/TEX Hit|L2 Hit|Block Limit|Issue Slots|Executed Ipc" "$O/ncu-imma.txt" | head -30 | tee -a "$L"
step "kernel table M = 32..256"
timeout 100 $B probe --bench-kernels --kernel-dtypes q8_0,q4_k --kernel-tokens 1,32,64,128,256 > "$O/kbench-lin.txt" 2>&1
grep -E "defines|q8_0|q4_k" "$O/kbench-lin.txt" | cut -c1-110 | tee -a "$L"
step done
