#!/bin/bash
# Thirty-sixth session, after run 125 (H100: TCW_WS with 1-D bulk copies 1.84x slower than the
# cp.async ring at any stage count; 1.49x with the cluster's multicast x). Any card:
# 1. research/cuda/probe_bulk.cu: the L2 -> shared memory rate of cp.async against 1-D bulk copies
#    of 1-24 KiB and one 3-D tensor copy a unit, no MMAs.
# 2. TCW_TMA (the producer warp's copies as tensor copies, one a unit and operand): green check
#    at 4 stages; self-check with TCW_CLUSTER at 5 stages.
# 3. Kernel table at M = 1,024: shipped / TCW_TMA 4, 6 stages / TCW_TMA + TCW_CLUSTER 5 stages.
# 4. BF16 TTFT of 1,024 tokens, ABBA: rows / rows + the faster TCW_TMA form.
# On an H200, before all of it: research/cuda/h200_run126.sh's ABBAs (about 4.5 minutes).
# Predictions: probe: 1 KiB bulk copies at about half the cp.async rate, the tensor copy at or
# above it. TCW_TMA at least as fast as the shipped form (BF16 gate+up 1,280 -> 1,150-1,300 us on
# an H100); with the cluster -15 to -25% below that.
# Usage: h200_run127.sh MEMRA OUT_DIR [SECONDS] (about 5 minutes; 9.5 on an H200)
set -u
N=$1; O=$2; B=${3:-450}
source "$(dirname "$0")/run_lib.sh"
run_start any
# On an H200 first: run 126's A/B for the H200 file (ATTN_ROWS = 64, TCW_UPB_Q = 2), green-checked.
mk base
mk rows ATTN_ROWS=64
mk uq2 TCW_UPB_Q=2
mk both ATTN_ROWS=64 TCW_UPB_Q=2
case "$gpu" in *H200*)
  if green both; then ttft bf16 base rows rows base; ttft q8_0 base uq2 uq2 base; fi;;
esac
step "probe_bulk"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$NVCC -O2 -arch=sm_90a -o /tmp/pb "$(dirname "$0")/probe_bulk.cu" -lcuda > "$O/pb.txt" 2>&1 && timeout 60 /tmp/pb >> "$O/pb.txt" 2>&1
tail -14 "$O/pb.txt" | tee -a "$L"
mk tma TCW_BULK=1 TCW_WS=1 TCW_TMA=1
mk tmac TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_CLUSTER=1 TCW_STAGES=5
mk rowstma ATTN_ROWS=64 TCW_BULK=1 TCW_WS=1 TCW_TMA=1
mk rowstmac ATTN_ROWS=64 TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_CLUSTER=1 TCW_STAGES=5
mk tmaq QTC_Q4_K=2 TCW_BULK=1 TCW_WS=1 TCW_TMA=1
left $((B - 200)) "TCW_TMA" || exit 0
green tma || { step "TCW_TMA not green: no timing"; exit 1; }
# Q4_K on the wgmma form (its scale and Σx maps): the self-check before any Q4_K timing.
step "self-check, f32 cache, config tmaq"
timeout 100 $N --config /tmp/c-tmaq.toml probe --self-check > "$O/sc-tmaq.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-tmaq.txt" | tail -3 | cut -c1-200 | tee -a "$L"
tc=0
step "self-check, f32 cache, config tmac"
timeout 100 $N --config /tmp/c-tmac.toml probe --self-check > "$O/sc-tmac.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-tmac.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-tmac.txt" && tc=1
V="QTC_Q4_K=2;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_TMA=1;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_TMA=1,TCW_STAGES=6"
[ $tc = 1 ] && V="$V;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_TMA=1,TCW_CLUSTER=1,TCW_STAGES=5"
left $((B - 110)) "kernel table" || exit 0
step "kernel table, M = 1,024"
timeout 150 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0,q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "$V" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^TCW/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
# The faster TCW_TMA form by BF16 gate+up (variant 2: 4 stages; 4: the cluster).
best=$(awk '/^linear BF16 .*gate\+up/ { i++; if (i == 2 || i == 4) if (b == "" || $7 < m) { m = $7; b = i } } END { print b }' "$O/kbench.txt")
if [ "${best:-2}" = 4 ]; then ttft bf16 rows rowstmac rowstmac rows; else ttft bf16 rows rowstma rowstma rows; fi
step done; exit 0
