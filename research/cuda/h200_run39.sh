#!/bin/bash
# Tenth session, last call. Two questions:
# A. The tiled tensor-core form (QTC_GEMM = 1, new, compile-tested only): bit-identical rows for
#    every M (self-check now includes M = 130, two 128-token blocks) and its speed at M = 1,024.
#    Prediction: BF16 gate+up at M = 1,024 from 2,984 us (run 37, best linear_tc) to under 1,000
#    us; BF16 TTFT of 1,024 tokens from 236 ms to under 120 ms.
# B. Can BF16 take QTC for every M without losing bs=1? Run 36: BF16 bs=32 on the lane kernels
#    is 486 tok/s against gpt-fast's 5,881; run 21: QTC_UNROLL = 1 came closest at M = 1.
#    Prediction: WT = 1 helps the 4096-row matrices at M = 1; bs=1 180-190, bs=32 2,800-3,200.
# Usage: h200_run39.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC = "1"\nQTC_UNROLL = "1"\nQTC_XSPLIT = "1"\nQTC_GEMM = "1"\n' > /tmp/g1.toml
printf '[kernel_defines]\nQTC = "1"\nQTC_UNROLL = "1"\nQTC_GEMM = "1"\n' > /tmp/g3.toml
printf '[kernel_defines]\nQTC = "1"\nQTC_UNROLL = "1"\n' > /tmp/tcu1.toml
step "self-check, defaults (M now up to 130)"
timeout 60 $B probe --self-check > "$O/selfcheck-defaults.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-defaults.txt" | tail -3 | cut -c1-220 | tee -a "$L"
step "self-check QTC=1 UNROLL=1 XSPLIT=1 GEMM=1"
timeout 60 $B --config /tmp/g1.toml probe --self-check > "$O/selfcheck-g1.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-g1.txt" | tail -5 | cut -c1-220 | tee -a "$L"
step "self-check QTC=1 UNROLL=1 GEMM=1 (3 parts)"
timeout 60 $B --config /tmp/g3.toml probe --self-check > "$O/selfcheck-g3.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-g3.txt" | tail -5 | cut -c1-220 | tee -a "$L"
step "kernel table, tiled form, M = 128, 1024"
timeout 90 $B probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 128,1024 \
  --variants "QTC=1,QTC_XSPLIT=1,QTC_GEMM=1;QTC=1,QTC_GEMM=1" > "$O/kbench-gemm.txt" 2>&1
grep -E "defines|gate\+up|q/o|down|rror" "$O/kbench-gemm.txt" | cut -c1-100 | tee -a "$L"
step "TTFT BF16 1024, tiled form, 1 and 3 parts"
for c in g1 g3; do
  timeout 60 $B --backend cuda --config /tmp/$c.toml bench ttft --model synth:llama-3.1-8b:bf16 \
    --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "BF16 kernel table M = 1, 8, 32"
timeout 120 $B probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,8,32 \
  --variants "QTC=0;QTC=1,QTC_UNROLL=1;QTC=1,QTC_UNROLL=1,QTC_WT=1;QTC=1,QTC_UNROLL=2,QTC_WT=1;QTC=1,QTC_UNROLL=1,QTC_SPLIT=4;QTC=1,QTC_UNROLL=1,QTC_SPLIT=16" \
  > "$O/kbench-bf16.txt" 2>&1
grep -E "defines|gate\+up|q/o|down" "$O/kbench-bf16.txt" | cut -c1-100 | tee -a "$L"
step "decode BF16 bs=1,32 with QTC=1 UNROLL=1 GEMM=1"
timeout 100 $B --backend cuda --config /tmp/g3.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32 \
  --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step "gates qwen3 with QTC=1 UNROLL=1 GEMM=1"
timeout 40 $B --config /tmp/g3.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-g3.txt" 2>&1
grep -E "gates run|FAIL|RED" "$O/gates-g3.txt" | tee -a "$L"
step done
