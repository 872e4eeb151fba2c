#!/bin/bash
# Eleventh session: the candidate H200 defaults after run 43: PDL = 1 (BF16 bs=1 +3.8%, Q8_0
# -1.1%, Q4_K 335.6 against run 42's 318.3) and x in two bf16 parts (QTC_XSPLIT = 2: Level B
# green with max |dlogit| 7.1e-5, TTFT 216 -> 179 ms). Checks first: the self-check (its bound
# follows QTC_XSPLIT) and the CUDA lane with both; then BF16 decode bs=1,32 and TTFT of 1,024.
# Usage: h200_run44.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nPDL = "1"\nQTC_XSPLIT = "2"\n' > /tmp/c.toml
step "self-check, PDL = 1, QTC_XSPLIT = 2"
timeout 60 $B --config /tmp/c.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane: $g"
  timeout 40 $B --config /tmp/c.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED|rror" "$O/gates-$g.txt" | head -5 | cut -c1-250 | tee -a "$L"
done
step "BF16 decode bs=1,32"
timeout 120 $B --backend cuda --config /tmp/c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32 \
  --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
step "TTFT BF16 1024"
timeout 60 $B --backend cuda --config /tmp/c.toml bench ttft --model synth:llama-3.1-8b:bf16 \
  --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
step done
