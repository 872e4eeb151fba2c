#!/bin/bash
# Prepared in the eleventh session for the twelfth (not yet run). The speculation policy now
# fits a verify's cost as spec_verify_base + k x spec_row_cost from verifies of 2 and 5 rows, and
# pauses below the per-token break-even acceptance of that fit. Run 40 measured only the 5-row
# verify on the H200 (2.03 decode rows, Q8_0). This re-measures the spec constants alone (about
# a minute) on the 8B Q8_0 and writes a file to compare with boards/defaults/nvidia-h200.toml
# (its other entries are kept from it; copy the spec_* entries over if they differ).
# Usage: h200_run48.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "tune --what spec, 8B q8_0, N = 5"
timeout 300 $B --backend cuda tune --model synth:llama-3.1-8b:q8_0 --what spec --reps 5 --gates qwen3 \
  --out "$O/nvidia-h200.toml" > "$O/tune.txt" 2>&1
echo "rc $?" | tee -a "$L"
grep -E "verify|batch|gates run|wrote|rror" "$O/tune.txt" | tee -a "$L"
step done
