#!/bin/bash
# Run 139 (prepared in the thirty-ninth session): the next device session's first call, in one
# machine start. 1. research/cuda/h200_run138.sh (probe_wgmma_rate, ~10 s). 2. The split-K
# descriptor A/B (research/cuda/h200_run137.sh: A = main's binary, B = branch tck-desc's).
# 3. On an H200 only: BF16 TTFT of 1,024 tokens, ABBA ship / ATTN_TILE = 1 with binary A (the
#    H200 file's ATTN_TILE entry; every H100 run gave -1.3 to -1.4%) and the board's TTFT with
#    the shipped file and the one-add descriptors (H200 run 127: 100.0 ms before them), after
#    the tile's green (self-check f32/f16, lanes) on the H200.
# Carry target/memra-a.gz and target/memra-b.gz; the call's limit 600 s.
# Usage: h200_run139.sh MEMRA_A MEMRA_B OUT_DIR
set -u
NA=$1; NB=$2; O=$3
D=$(dirname "$0")
mkdir -p "$O/probe" "$O/tck"
bash "$D/h200_run138.sh" "$O/probe"
bash "$D/h200_run137.sh" "$NA" "$NB" "$O/tck" 290
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
*H200*)
  N=$NA; B=250; source "$D/run_lib.sh"; L=$O/log.txt; t0=$(date +%s)
  mk ship; mk tile ATTN_TILE=1
  green tile && ttft bf16 ship tile tile ship;;
*) echo "not an H200: no TTFT A/B" | tee -a "$O/log.txt";;
esac
