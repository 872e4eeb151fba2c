#!/bin/bash
# Prepared in the tenth session (for the eleventh; not yet run): issue #8's full `memra tune` on the 8B Q8_0 shape with N = 5,
# resumable. Run 38 showed the sweep needs about 45 candidates × 28 s, more than one call: this
# script runs `tune --resume` into $O (the partial travels back under $OUT and must be carried
# into the next call as research/cuda/tune-partial/nvidia-h200.toml.partial). Writes the final
# file only when every value is decided and the qwen3 CUDA gates are green with it.
# The sweep runs on top of the committed H200 defaults (BF16 on QTC, Q8_0 on the lanes), and the
# file it writes keeps their entries for what it does not sweep, so it can replace
# boards/defaults/nvidia-h200.toml as it is.
# Usage: h200_run40.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
P=research/cuda/tune-partial/nvidia-h200.toml.partial
[ -f "$P" ] && cp "$P" "$O/nvidia-h200.toml.partial" && echo "carried partial" | tee -a "$L"
step "tune 8B q8_0, N = 5, --resume"
timeout 540 $B --backend cuda tune --model synth:llama-3.1-8b:q8_0 --reps 5 --resume \
  --out "$O/nvidia-h200.toml" > "$O/tune.txt" 2>&1
echo "rc $?" | tee -a "$L"
tail -30 "$O/tune.txt" | cut -c1-160 | tee -a "$L"
step done
