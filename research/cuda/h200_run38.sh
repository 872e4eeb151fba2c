#!/bin/bash
# Prepared in the ninth session for the tenth (not yet run): issue #8's full `memra tune` on the
# 8B Q8_0 shape with N = 5 (kernels, prefill chunk, speculation), gates on the kept set, written
# beside the committed file for review (copy it over boards/defaults/nvidia-h200.toml only if the
# gates it ran were green). Run alone: the sweep is the whole call.
# Usage: h200_run38.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "tune 8B q8_0, N = 5"
timeout 540 $B --backend cuda tune --model synth:llama-3.1-8b:q8_0 --reps 5 --out "$O/nvidia-h200.toml" \
  > "$O/tune.txt" 2>&1
echo "rc $?" | tee -a "$L"
tail -40 "$O/tune.txt" | cut -c1-160 | tee -a "$L"
step done
