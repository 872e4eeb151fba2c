#!/bin/bash
# Sixteenth session, second call. Run 59: the second tiled form (QTC_GEMM = 2) is green but 13%
# slower than the first (BF16 gate+up at M = 1,024: 2,405 against 2,131 us) with twice the warps
# a scheduler and fewer instructions a unit. Nsight Compute stall reasons (per issued
# instruction) for both forms at that shape, to find the shared bound.
# Usage: h200_run60.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk g1; mk g2 QTC_GEMM=2
for c in g1 g2; do
  step "ncu $c"
  timeout 120 ncu --clock-control none --kernel-name regex:linear_tcg --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_pipe_tensor.sum \
    $B --config /tmp/c-$c.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1024 --kernel-shapes gate+up > "$O/ncu-$c.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\)|L2 Hit|Issue Slots|Executed Ipc|Eligible Warps|No Eligible|stalled|inst_executed|bank_conflicts|L1/TEX Cache Throughput|L2 Cache Throughput|Mem Pipes|Max Bandwidth" "$O/ncu-$c.txt" | awk '$NF+0 > 0.05 || !/stalled/' | head -45 | tee -a "$L"
done
step done
