#!/bin/bash
# Prepared in the sixth session (not yet run): target 5 (bs=1 decode at an 8k depth against the
# 128-token figure, Q8_0 and BF16, defaults) and the tensor-core kernels' M = 1 cost by knobs that
# change no result: more row tiles per warp (the x split shared by 4 tiles; with QTC_UNROLL=2,
# since 4 tiles at unroll 4 spill), and a two-part x split (its own bits, the same for every M).
# Usage: h200_next_c.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for d in q8_0 bf16; do
  for depth in 128 8192; do
    step "decode bs=1 depth $depth $d"
    $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth $depth --new-tokens 128 \
      --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  done
done
step "kbench QTC knobs"
$B probe --bench-kernels --kernel-tokens 1,8,32 --kernel-dtypes bf16,q8_0 \
  --variants "QTC=1;QTC=1,QTC_UNROLL=2;QTC=1,QTC_WT=4,QTC_UNROLL=2;QTC=1,QTC_WT=4,QTC_UNROLL=2,QTC_XSPLIT=2" > "$O/kbench-qtc.txt" 2>&1
grep -E "defines|(BF16|Q8_0).*(gate\+up|down|q/o) " "$O/kbench-qtc.txt" | tee -a "$L"
step done
