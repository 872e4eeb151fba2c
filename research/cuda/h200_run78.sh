#!/bin/bash
# The same-call A/B of commit 60fcc0c's reduce and sampling kernels (binary of 40c0fca-era
# main with the --against fix) against the binary before them (0556f98): bench --compare
# --against, BF16 bs=32 x 128 new tokens, interleaved run by run. Prediction: +4-5% (run 77
# against run 72 across calls: +4.2-4.7%).
# Usage: h200_run78.sh NEW OLD OUT_DIR REF REPS [LIMIT_S (default 200; run 78 ran out at 200 with
# N = 3: every run of either side loads the 8B model, so allow about 60 s a run and side)]
set -u
B=$1; A=$2; O=$3; REF=$4; N=$5; T=${6:-200}; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "bench --compare $REF --against old, N = $N"
timeout "$T" $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --compare "$REF" --against "$A" \
  --reps "$N" --out "$O/compare.jsonl" > "$O/compare.txt" 2>&1
echo "rc $?" >> "$O/compare.txt"
grep -vE "INFO|WARN" "$O/compare.txt" | tail -10 | cut -c1-250 | tee -a "$L"
step done
