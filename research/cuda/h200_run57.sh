#!/bin/bash
# Prepared in the fourteenth session for the next one (not yet run). Where the Q8_0 bs=1 loss
# of the tensor-core path comes from (run 54: 258.4 against the lanes' 272.8 tok/s, 0.20 ms a
# step, of which the four per-layer matrices explain 0.03).
# 1. The LM head [128256, 4096] at M = 1 (probe --kernel-shapes lm-head, new): Q8_0 tensor cores
#    (the shipped defaults) against the lane kernels (QTC_Q8_0 = 0), and the big-entry knobs on
#    it. Two numbers: 558 MB of quants + 32 MB of scales, 133 us at the copy bandwidth.
#    Prediction: tensor cores 185-200 us, lanes 165-175 (gate+up's 8% gap, scaled).
# 2. Step time split: bs=1 decode with QTC_Q8_0 = 0 / 1 at 64 and 256 new tokens (a fixed part
#    per step against a part that grows with depth tells the attention from the linears).
# 3. (added in the fifteenth session) Nsight Compute on the tiled form linear_tcg_bf16 at M = 1,024
#    (gate+up, 240 GFLOP, x in 2 parts: 481 GFLOP of MMA): stall reasons and pipe use, to decide
#    the tiled GEMM's rework. Hypothesis: each unit's 4 dependent MMAs per tile run latency-bound
#    (252 registers leave no room to interleave tiles), not issue- or memory-bound.
# Usage: h200_run57.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk tc; mk lanes QTC_Q8_0=0; mk b2n QTC_Q8_UNROLL_BIG=2 QTC_Q8_DB_BIG=0; mk db0 QTC_Q8_DB_BIG=0
for n in tc lanes b2n db0; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 1,32 \
    --kernel-shapes gate+up,lm-head > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s@%s %s  ", $5, $6, $7}' "$O/k-$n.txt")" | tee -a "$L"
done
for c in tc lanes tc lanes; do
  for nt in 64 256; do
    step "Q8_0 bs=1, $nt new tokens, $c"
    timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
      --depth 128 --new-tokens $nt --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
done
step "ncu linear_tcg_bf16 (tiled form) at M = 1,024, gate+up, shipped defaults"
timeout 150 ncu --clock-control none --kernel-name regex:linear_tcg_bf16 --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B --config /tmp/c-tc.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1024 --kernel-shapes gate+up > "$O/ncu-tcg.txt" 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)|Stall|L2 Hit|Block Limit|Issue Slots|Executed Ipc|Pipe|Warp Cycles|No Eligible|Eligible Warps" "$O/ncu-tcg.txt" | head -40 | tee -a "$L"
step done
