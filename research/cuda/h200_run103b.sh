#!/bin/bash
# Twenty-sixth session: run 103 stopped at its first step (the self-check with QTC_WT_ALT = 3
# failed "fused+bias = _tc bits" on the 6,336-row matrix; off by default, see the notes), so
# this runs its Nsight Compute step alone, on the shipped defaults.
# Usage: h200_run103b.sh MEMRA OUT_DIR (about 1 minute)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
# Why the small Q8_0 matrices sit at 44-57% of copy bandwidth at M = 1 against BF16's ~85%
# (twenty-sixth session, no device: the reading is open): Nsight Compute on the one-token
# entries of the shipped defaults, cold L2. Long-scoreboard stalls dominating with DRAM well
# under its peak = too few bytes in flight a warp between round trips; barrier/MIO = the
# slices' reduce; an issue-active figure near 100% = instruction-bound (the int8 -> bf16
# conversion and the x parts). Q8_0 and BF16 compare the same kernel with half the bytes; Q4_K
# (exact integers, the lane kernel `linear_q4_k_r_m1`, 37% of copy bandwidth) is target 2's other half.
M='gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active'
for st in long_scoreboard wait barrier lg_throttle mio_throttle short_scoreboard math_pipe_throttle not_selected no_instruction; do
  M="$M,smsp__average_warps_issue_stalled_${st}_per_issue_active.ratio"
done
for fmt in q8_0 bf16 q4_k; do
  for shape in q/o gate+up; do
    f=$fmt-$(echo $shape | tr /+ __)
    step "ncu, one-token entry at M = 1, $fmt $shape"
    timeout 90 ncu --clock-control none -k regex:'linear_(tc|q4_k)' --launch-skip 6 --launch-count 1 --metrics "$M" \
      $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes $fmt --kernel-shapes $shape \
      > $O/ncu-$f.txt 2>&1
    grep -E "^  [a-z_]+.*\(|gpu__time|dram__|issue_active|warps_active|stalled|ERROR" $O/ncu-$f.txt \
      | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/ +/ /g' | cut -c1-110 | tee -a "$L"
  done
done
step done
