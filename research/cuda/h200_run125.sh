#!/bin/bash
# Thirty-fifth session, after run 124 (H100): TCW_CLUSTER was green but 1.32x slower (default-
# semantics barriers; 2.4x with release/acquire.cluster), at 3-6 stages alike. Reading: the thread
# that waits on the peer and issues the copies sits in warpgroup 0's path every unit, as warp 0
# did in run 63's TCW_BULK (1.8x slower; stalls barrier 4.2, gmma 2.9). TCW_WS (written after run
# 124, not yet run) moves every copy to a producer warp with full/empty mbarriers a stage and no
# block barrier a unit (CUTLASS's warp-specialized mainloop).
# Parts, any card (the H200 defaults file elsewhere), with elapsed-time guards:
# 1. On an H200 only: the ATTN_ROWS = 64 A/B for the H200 file (BF16 TTFT of 1,024, ABBA; runs
#    119-123 measured -16.8% on three H100 machines).
# 2. Green checks of TCW_WS at 5 stages (self-check f32 + f16, CUDA lanes) and a self-check at 6.
# 3. Kernel table BF16, Q8_0, Q4_K at M = 1,024: shipped / TCW_WS at 4, 5, 6 stages / TCW_UPB_Q 2.
# 4. TCW_CLUSTER on TCW_WS at 5 stages: self-check (f32), its kernel table.
# 5. BF16 TTFT ABBA rows / rows + TCW_WS at the stage count with the fastest BF16 gate+up (and
#    rows + TCW_WS + TCW_CLUSTER if its self-check passed); Q8_0 TTFT ABBA shipped / TCW_WS.
# Predictions: TCW_WS at least as fast as the shipped cp.async form (the copies leave the MMA
# warps' path and the block barrier goes), BF16 gate+up at M = 1,024 1,282 -> 1,100-1,250 us on an
# H100 (-3 to -14%: the L2 bound of run 123 stays); if so, TCW_CLUSTER's multicast goes onto the
# producer warp next.
# Usage: h200_run125.sh MEMRA OUT_DIR [SECONDS] (about 9 minutes)
set -u
N=$1; O=$2; B=${3:-580}  # B: seconds the call may run
source "$(dirname "$0")/run_lib.sh"
run_start any
mk base
mk rows ATTN_ROWS=64
for s in 4 5 6; do mk ws$s TCW_BULK=1 TCW_WS=1 TCW_STAGES=$s; done
case "$gpu" in *H200*) ttft bf16 base rows rows base;; esac
green ws5 || { step "TCW_WS not green: no timing"; exit 1; }
step "self-check, f32 cache, config ws6"
timeout 120 $N --config /tmp/c-ws6.toml probe --self-check > "$O/sc-ws6.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-ws6.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-ws6.txt" || { step "TCW_WS at 6 stages not green: no timing"; exit 1; }
step "kernel table, M = 1,024"
timeout 150 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0,q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QTC_Q4_K=2;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_STAGES=5;QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_STAGES=6;QTC_Q4_K=2,TCW_UPB_Q=2" \
  > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^TCW/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
# The TCW_WS stage count with the fastest BF16 gate+up (variants 2-4 are 4, 5, 6 stages).
best=$(awk '/^linear BF16 .*gate\+up/ { i++; if (i > 1 && i < 5 && (b == "" || $7 < m)) { m = $7; b = i + 2 } } END { print b }' "$O/kbench.txt")
best=${best:-5}
step "TCW_WS stages for the TTFT: $best"
mk rowsws ATTN_ROWS=64 TCW_BULK=1 TCW_WS=1 TCW_STAGES=$best
# TCW_CLUSTER on TCW_WS (the producer warps multicast x): self-check first (a hang costs its
# timeout, not the table above), then its own kernel table.
mk wsc5 TCW_BULK=1 TCW_WS=1 TCW_CLUSTER=1 TCW_STAGES=5
mk rowswsc ATTN_ROWS=64 TCW_BULK=1 TCW_WS=1 TCW_CLUSTER=1 TCW_STAGES=5
wsc=0
step "self-check, f32 cache, config wsc5"
timeout 100 $N --config /tmp/c-wsc5.toml probe --self-check > "$O/sc-wsc5.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-wsc5.txt" | tail -3 | cut -c1-200 | tee -a "$L"
if grep -q "self-check: PASS" "$O/sc-wsc5.txt"; then
  wsc=1
  step "kernel table, M = 1,024, TCW_WS + TCW_CLUSTER"
  timeout 100 $N probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16,q8_0,q4_k --kernel-shapes q/o,qkv,gate+up,down \
    --variants "QTC_Q4_K=2,TCW_BULK=1,TCW_WS=1,TCW_CLUSTER=1,TCW_STAGES=5" > "$O/kbench-wsc.txt" 2>&1
  grep -E "^linear |rror" "$O/kbench-wsc.txt" | cut -c1-120 | tee -a "$L"
fi
if [ $wsc = 1 ]; then ttft bf16 rows rowsws rowswsc rowswsc rowsws rows; else ttft bf16 rows rowsws rowsws rows; fi
ttft q8_0 base ws$best ws$best base
# On an H200, if time is left: TCW_UPB_Q = 2 at the shipped 4 stages for the H200 file (Q8_0
# -10% at M = 1,024 on H100s, runs 123-124; BF16 unchanged).
mk uq2 TCW_UPB_Q=2
case "$gpu" in *H200*) ttft q8_0 base uq2 uq2 base;; esac
step done; exit 0
