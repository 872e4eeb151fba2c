#!/bin/bash
# Eighteenth session, third call. Runs 66-67: the wgmma split-K form's time does not move with
# TCK_UB (1-8 units a batch), TCK_STAGES (4-16), TCK_WG (1-2) or the token width (16/32): about
# 1.6 TB/s on the big matrices, 6 bytes a cycle an SM. Nsight Compute on linear_tck_bf16_n32
# (gate+up [28672, 4096], M = 32, TCK_UB = 4) to see what it waits on.
# Prediction: issue-bound (IPC near 1 with 2 warps a scheduler, most stalls "long scoreboard" on
# the ring's LDS after cp.async, or "wait"), DRAM throughput near 35%.
# Usage: h200_run68.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_SK = "3"\n' > /tmp/c-k.toml
step "ncu linear_tck_bf16_n32, gate+up, M = 32"
timeout 150 ncu --clock-control none --kernel-name regex:linear_tck --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum \
  $B --config /tmp/c-k.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 32 --kernel-shapes gate+up > "$O/ncu.txt" 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occ|Compute \(SM\)|L2 Hit|Issue Slots|Executed Ipc|Eligible Warps|No Eligible|stalled|inst_executed|L2 Cache Throughput|DRAM Through|Grid Size|Block Size|Dynamic Shared|Waves Per SM|Block Limit" "$O/ncu.txt" | awk '$NF+0 > 0.05 || !/stalled/' | head -45 | tee -a "$L"
step done
