#!/bin/bash
# Run 138 (prepared in the thirty-ninth session): research/cuda/probe_wgmma_rate.cu, the wgmma
# GEMM's MMAs alone (no copies): per-unit drain, folds, N = 64 against N = 128, 1-3 warpgroups.
# Any card; about 10 s. Its table says which restructuring of linear_tcw's loop could reach the
# pipe: if `fold` at 2 warpgroups is near 1,230 cycles a unit, the folds' order is the bound
# (target 4 then needs the fold off the MMA's path, e.g. more warpgroups or N = 128); if near
# `stream`, the copies and barriers are.
# Usage: h200_run138.sh OUT_DIR
set -u
O=$1; L=$O/log.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$L"
NVCC=/usr/local/cuda/bin/nvcc; [ -x $NVCC ] || NVCC=$(command -v nvcc)
# (Run 139: with -arch=sm_90a that machine's nvcc built compute_90 PTX and ptxas refused wgmma; the
# explicit -gencode below names the sm_90a feature set.)
$NVCC -O2 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/pr "$(dirname "$0")/probe_wgmma_rate.cu" > "$O/build.txt" 2>&1 || { tail -20 "$O/build.txt" | tee -a "$L"; exit 1; }
grep -E "spill|wgmma" "$O/build.txt" | grep -v " 0 bytes spill" | head -5 | tee -a "$L"
timeout 60 /tmp/pr 2>&1 | tee -a "$L"
