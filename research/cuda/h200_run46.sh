#!/bin/bash
# Prepared in the eleventh session for the twelfth (run in the twelfth, M = 32 first): Nsight Compute on the four
# kernels behind #7's open targets, with the H200 defaults (PDL = 1, QTC_XSPLIT = 2), each on the
# fused gate+up [28672, 4096] alone (probe --kernel-shapes gate+up: 3 warm-up + 140 timed launches
# per M, so --launch-skip 10 lands on a warm one):
#   1. linear_q8_0_r_m1, M = 1 (target 2: Q8_0 bs=1 reads at 56% of copy bandwidth, BF16 at 84%);
#   2. linear_tc_bf16_*, M = 1 (the BF16 one-token tensor-core kernel, target 1);
#   3. linear_tc_bf16_*, M = 32 (target 3: bs=32 costs about 1.8x bs=1);
#   4. linear_tcg_bf16, M = 1,024 (target 4: the tiled form at about a seventh of the MMA rate).
# Usage: h200_run46.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats"
prof() { # name regex dtype M
  step "ncu $1 ($3, M = $4)"
  timeout 150 ncu --clock-control none --kernel-name regex:$2 --launch-skip 10 --launch-count 1 $SECTIONS \
    $B probe --bench-kernels --kernel-dtypes $3 --kernel-tokens $4 --kernel-shapes gate+up > "$O/ncu-$1.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|L2 Hit|Block Limit (Reg|Shared)" \
    "$O/ncu-$1.txt" | head -16 | tee -a "$L"
}
step "kernel table, BF16 M = 1, 32 (every 8B shape)"
timeout 60 $B probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,32 2>&1 | grep -E "^linear|^attn" | tee -a "$L"
prof tc_m32 linear_tc_bf16 bf16 32
prof q8_m1 linear_q8_0_r_m1 q8_0 1
prof tc_m1 linear_tc_bf16 bf16 1
prof tcg_m1024 linear_tcg_bf16 bf16 1024
step done
