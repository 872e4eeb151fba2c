#!/bin/bash
# Prepared in the twenty-third session (not run): the small matrices of a BF16 bs=32 step.
# Run 74's profile: o (one-token form `linear_tc_bf16_n4`, 33.5 MB) 18.3 us = 1.8 TB/s, qkv
# (wgmma split-K) 2.5 TB/s, down 3.0, against gate+up's 3.4: bringing them to gate+up's rate is
# about +9% at bs=32 (target 3). Kernel table only, variants of the defines that shape them:
# - QTC_WT (row tiles a block of the one-token forms; 2 on the H200): at M = 32 the o matrix
#   gets 128 blocks of 16 warps, one an SM, 256 KB each; 1 gives 256 blocks (two an SM).
#   QTC_WT applies to every one-token entry (bs=1 too), so M = 1 is timed beside it.
# - TCK_MIN_MB = 0 (q/o on the wgmma split-K form too; run 71 found it slower, 17.0 -> 19.3).
# - QTC_SK_WAVES = 2 (two blocks an SM for the split-K form).
# Reading: a variant that takes o or qkv at M = 32 below its current time without slowing M = 1
# is worth a define of its own (a QTC_WT for the `_n4` entries) or a default change.
# Usage: h200_run96.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "kernel table, BF16, M = 1 / 32"
timeout 150 $B probe --bench-kernels --kernel-tokens 1,32 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,down \
  --variants ";QTC_WT=1;QTC_WT=4;TCK_MIN_MB=0;QTC_SK_WAVES=2" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | sed -E '/defines/{s/.*/& /;s/^kernels, defines \{.*$/echo "kernels, defines: $(echo "&" | grep -oE "(QTC_WT|TCK_MIN_MB|QTC_SK_WAVES)=[0-9]+" | tr "\\n" " ")"/e}' | cut -c1-110 | tee -a "$L"
step done
