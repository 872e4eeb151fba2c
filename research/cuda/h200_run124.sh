#!/bin/bash
# Thirty-fourth session, after run 123 (H100). Run 123: TCW_UPB made Q8_0's wgmma GEMM 10-12%
# faster at M = 1,024 and BF16's up to 11% slower. The BF16 form is bound by the 24 KiB a unit
# and block it reads from L2 (about 1,040 cycles at ~24 bytes a cycle an SM, against 1,256
# measured). Q8_0 reads 20.3 KiB and spends more instructions a unit on its fragments and folds.
# Three parts, any card (the H200 defaults file elsewhere):
# 1. research/cuda/probe_multicast.cu (nvcc): multicast bulk copies and remote mbarrier arrivals
#    in clusters of 2. The TCW_CLUSTER parts run only if it passes.
# 2. Green checks: TCW_UPB_Q = 3 with TCW_STAGES = 6 and QTC_Q4_K = 2 (self-check f32 + f16,
#    lanes), and TCW_CLUSTER = 1 with TCW_STAGES = 5 (the same).
# 3. Kernel table BF16, Q8_0, Q4_K at M = 1,024; BF16 TTFT ABBA rows / rows + TCW_CLUSTER; Q8_0
#    TTFT ABBA shipped / TCW_UPB_Q = 3.
# Predictions: TCW_CLUSTER BF16 GEMM -20 to -30% (x 16 -> 8 KiB a unit and block), TTFT
# 109 -> 88-95 ms on an H100; Q8_0 TTFT -6 to -9% with TCW_UPB_Q = 3.
# Added in the thirty-fifth session: TCW_CLUSTER_CTA = 1 (CUTLASS's default-semantics remote
# arrivals and waits, no MEMBAR.GPU / CCTL.IVALL a unit) beside TCW_CLUSTER = 1, green-checked
# and in the kernel table and the BF16 TTFT.
# Reordered in the thirty-fifth session (device time was short): the cluster parts first, the
# TCW_UPB_Q parts only while time is left (elapsed-time guards). Its `left` and `ttft` moved to
# run_lib.sh afterwards (same commands).
# Usage: h200_run124.sh MEMRA OUT_DIR [SECONDS] (about 5-9 minutes)
set -u
N=$1; O=$2; B=${3:-580}  # B: seconds the call may run
source "$(dirname "$0")/run_lib.sh"
run_start any
mk base
mk uq3 TCW_UPB_Q=3 TCW_STAGES=6
mk uq3c TCW_UPB_Q=3 TCW_STAGES=6 QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
mk c5 TCW_CLUSTER=1 TCW_STAGES=5
mk rows ATTN_ROWS=64
mk rowsc ATTN_ROWS=64 TCW_CLUSTER=1 TCW_STAGES=5
mk cc5 TCW_CLUSTER=1 TCW_CLUSTER_CTA=1 TCW_STAGES=5
mk rowscc ATTN_ROWS=64 TCW_CLUSTER=1 TCW_CLUSTER_CTA=1 TCW_STAGES=5
step "probe_multicast"
cl=0
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if $NVCC -O2 -arch=sm_90a -o /tmp/pmc "$(dirname "$0")/probe_multicast.cu" > "$O/pmc.txt" 2>&1 && timeout 30 /tmp/pmc >> "$O/pmc.txt" 2>&1; then cl=1; fi
tail -2 "$O/pmc.txt" | tee -a "$L"
if [ $cl = 1 ]; then
  green c5 || { step "TCW_CLUSTER not green: its timings are left out"; cl=0; }
  mkdir -p "$O/c5"; mv "$O"/sc-f32.txt "$O"/sc-f16.txt "$O"/gates* "$O/c5/" 2>/dev/null
fi
step "kernel table, M = 1,024"
V="QTC_Q4_K=2;QTC_Q4_K=2,TCW_UPB_Q=3,TCW_STAGES=6"
[ $cl = 1 ] && V="$V;QTC_Q4_K=2,TCW_CLUSTER=1,TCW_STAGES=5;QTC_Q4_K=2,TCW_CLUSTER=1,TCW_CLUSTER_CTA=1,TCW_STAGES=5"
timeout 150 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0,q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "$V" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^TCW/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
[ $cl = 1 ] && ttft bf16 rows rowsc rowscc rowscc rowsc rows
if [ $cl = 1 ] && left $((B - 160)) "green cc5"; then
  green cc5 || step "TCW_CLUSTER_CTA not green: its timings above do not count"
  mkdir -p "$O/cc5"; mv "$O"/sc-f32.txt "$O"/sc-f16.txt "$O"/gates* "$O/cc5/" 2>/dev/null
fi
if left $((B - 160)) "green uq3c"; then
  green uq3c && ttft q8_0 base uq3 uq3 base
fi
step done; exit 0
