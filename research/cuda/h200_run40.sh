#!/bin/bash
# Prepared in the tenth session; run in the eleventh (runs 40, 40b): issue #8's full `memra tune` on the 8B Q8_0 shape with N = 5,
# resumable. Run 38 showed the sweep needs about 45 candidates × 28 s, more than one call: this
# script runs `tune --resume` into $O (the partial travels back under $OUT and must be carried
# into the next call as research/cuda/tune-partial/nvidia-h200.toml.partial). Writes the final
# file only when every value is decided and the qwen3 CUDA gates are green with it.
# The sweep runs on top of the committed H200 defaults (BF16 on QTC, Q8_0 on the lanes), and the
# file it writes keeps their entries for what it does not sweep, so it can replace
# boards/defaults/nvidia-h200.toml as it is.
# Eleventh session: the kernel candidates now share one upload of the weights (tune/measure.rs).
# Usage: h200_run40.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
P=research/cuda/tune-partial/nvidia-h200.toml.partial
[ -f "$P" ] && cp "$P" "$O/nvidia-h200.toml.partial" && echo "carried partial" | tee -a "$L"
if [ ! -f "$P" ]; then
  # First call only: the CUDA lane with the committed defaults (run 41 added QTC_SPLIT_BIG = 4 and
  # QTC_GEMM_XASYNC = 1 after their self-checks).
  for g in qwen3 tiny; do
    step "CUDA lane, defaults: $g"
    timeout 40 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
    grep -E "gates run|FAIL|RED" "$O/gates-$g.txt" | tee -a "$L"
  done
fi
step "tune 8B q8_0, N = 5, --resume"
timeout $(( 560 - ($(date +%s) - t0) )) $B --backend cuda tune --model synth:llama-3.1-8b:q8_0 --reps 5 --resume \
  --out "$O/nvidia-h200.toml" > "$O/tune.txt" 2>&1
echo "rc $?" | tee -a "$L"
tail -30 "$O/tune.txt" | cut -c1-160 | tee -a "$L"
step done
