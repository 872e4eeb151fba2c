#!/bin/bash
# Prepared in the twenty-fifth session (not run; no device was lent after run 101). Target 2:
# the small matrices at M = 1. qkv has 384 row tiles: at QTC_WT = 2 that is 192 blocks of 16
# warps on 132 SMs (Q8_0 n1: 62 registers, two blocks fit an SM, so 60 SMs hold two and 72 one),
# each warp streaming 8 units of 2 tiles with 2 units in flight. At QTC_WT = 3: 128 blocks (one
# an SM; 76 registers for Q8_0, 64 for BF16, no spill: NVRTC 13.0 here), 3 KB a warp in flight.
# QTC_WT changes which block computes a row, never an operation: a per-matrix choice would keep
# the bits. Kernel table only, Q8_0 and BF16 at M = 1 for q/o, qkv, down, QTC_WT 2 / 3 / 4.
# Reading: if qkv at 3 beats 2 by more than the spread while q/o (86 blocks at 3) loses, a
# per-matrix WT (host: the count whose blocks fill the SMs in whole waves) is worth writing.
# Usage: h200_run103.sh MEMRA OUT_DIR (about 2 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "kernel table, Q8_0 and BF16, M = 1, QTC_WT 2 / 3 / 4"
timeout 200 $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0,bf16 --kernel-shapes q/o,qkv,down \
  --variants "QTC_WT=2;QTC_WT=3;QTC_WT=4" > "$O/kbench-wt.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench-wt.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_WT=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
step done
