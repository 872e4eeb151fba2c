#!/bin/bash
# Tenth session, last call: can BF16 take the tensor-core kernels (QTC = 1) for every M without
# losing bs=1? Run 36: BF16 bs=32 on the lane kernels is 486 tok/s against gpt-fast's 5,881;
# run 21: QTC's M = 32 gate/up is 6.6x faster than the lanes', but its M = 1 is 7-45% slower
# (QTC_UNROLL = 1 came closest: gate+up 63.8 against 59.8 us).
# 0. Self-check with QTC = 1, QTC_UNROLL = 1, QTC_XSPLIT = 1 (the bound now follows the x parts:
#    prediction PASS) and the qwen3 CUDA gates with QTC = 1, QTC_UNROLL = 1 (three parts).
# 1. BF16 kernel table at M = 1, 8, 32 for the lane kernels and QTC grid/pipeline variants.
#    Prediction: WT = 1 (twice the blocks) helps the 4096-row matrices at M = 1 (52% -> 65%).
# 2. BF16 decode bs=1 and bs=32 (depth 128, 128 new tokens, N = 5) with QTC = 1, QTC_UNROLL = 1
#    against the defaults (lane kernels). Prediction: bs=1 180-190 (lanes 202), bs=32 2,800-3,200.
# Usage: h200_run39.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC = "1"\nQTC_UNROLL = "1"\nQTC_XSPLIT = "1"\n' > /tmp/tcx1.toml
printf '[kernel_defines]\nQTC = "1"\nQTC_UNROLL = "1"\n' > /tmp/tcu1.toml
step "self-check QTC=1 UNROLL=1 XSPLIT=1"
timeout 60 $B --config /tmp/tcx1.toml probe --self-check > "$O/selfcheck-tcx1.txt" 2>&1
grep -E "self-check: |FAIL" "$O/selfcheck-tcx1.txt" | tail -4 | cut -c1-220 | tee -a "$L"
step "gates qwen3 with QTC=1 UNROLL=1"
timeout 60 $B --config /tmp/tcu1.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-tcu1.txt" 2>&1
grep -E "gates run|FAIL|RED" "$O/gates-tcu1.txt" | tee -a "$L"
step "BF16 kernel table M = 1, 8, 32"
timeout 200 $B probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,8,32 \
  --variants "QTC=0;QTC=1,QTC_UNROLL=1;QTC=1,QTC_UNROLL=1,QTC_WT=1;QTC=1,QTC_UNROLL=2,QTC_WT=1;QTC=1,QTC_UNROLL=1,QTC_SPLIT=4;QTC=1,QTC_UNROLL=1,QTC_SPLIT=16;QTC=1,QTC_UNROLL=1,QTC_DB=1;QTC=1,QTC_UNROLL=1,QTC_XSPLIT=1" \
  > "$O/kbench-bf16.txt" 2>&1
grep -E "defines|gate\+up|q/o|down" "$O/kbench-bf16.txt" | cut -c1-100 | tee -a "$L"
step "decode BF16 bs=1,32 with QTC=1 UNROLL=1"
timeout 150 $B --backend cuda --config /tmp/tcu1.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32 \
  --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step done
