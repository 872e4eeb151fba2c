#!/bin/bash
# Twelfth session. QTC_DB_BIG = 1: double-buffered weight loads in the one-token entry of the
# 4-slice (QTC_SPLIT_BIG) tensor-core matrices only. Run 49: QTC_DB = 1 took gate+up
# [28672, 4096] at M = 1 from 65.4 to 56.5 us but slowed the 16-slice matrices and M = 32.
# Prediction: BF16 bs=1 221 -> 230-235 tok/s (32 layers x 9 us of a ~4.5 ms step); bs=32 unchanged.
# Checks first (self-check, CUDA lane), then interleaved A/B.
# Usage: h200_run50.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_DB_BIG = "1"\n' > /tmp/db.toml
printf '[kernel_defines]\n' > /tmp/none.toml
step "self-check, QTC_DB_BIG = 1"
timeout 60 $B --config /tmp/db.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane, QTC_DB_BIG = 1: $g"
  timeout 40 $B --config /tmp/db.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -5 | cut -c1-250 | tee -a "$L"
done
step "kernels M = 1, 32, QTC_DB_BIG = 1"
timeout 40 $B --config /tmp/db.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,32 2>&1 | grep -E "^linear" | tee -a "$L"
for c in db none db none; do
  step "BF16 bs=1, $c"
  timeout 80 $B --backend cuda --config /tmp/$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128 \
    --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
done
step "BF16 bs=32, db"
timeout 80 $B --backend cuda --config /tmp/db.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
step done
