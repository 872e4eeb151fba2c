#!/bin/bash
# Eleventh session: programmatic dependent launch (PDL = 1: every kernel launched with
# programmatic stream serialization, every entry point waits with griddepcontrol.wait first).
# Prediction: the launch gaps between the ~290 kernels of a decode step shrink by about 1-1.5 us
# each, so bs=1 decode gains 6-9%: BF16 200.7 -> 213-219, Q8_0 278.8 -> 296-304 tok/s.
# Checks first (self-check and the CUDA lane with PDL = 1), then A/B decode (PDL = 1, then the
# defaults), then the CUDA lane and TTFT with x in two bf16 parts (QTC_XSPLIT = 2: Level B?).
# Usage: h200_run43.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nPDL = "1"\n' > /tmp/pdl.toml
printf '[kernel_defines]\nQTC_XSPLIT = "2"\n' > /tmp/x2.toml
step "self-check, PDL = 1"
timeout 60 $B --config /tmp/pdl.toml probe --self-check > "$O/selfcheck-pdl.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-pdl.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane, PDL = 1: $g"
  timeout 40 $B --config /tmp/pdl.toml gate --lane cuda --only $g --json "$O/gates-pdl.jsonl" > "$O/gates-pdl-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED|rror" "$O/gates-pdl-$g.txt" | head -5 | cut -c1-250 | tee -a "$L"
done
for q in bf16 q8_0; do
  for c in pdl none; do
    step "$q decode, config $c"
    cc=""; [ $c = pdl ] && cc="--config /tmp/pdl.toml"
    bs=1; [ $q = bf16 ] && bs=1,32
    timeout 120 $B --backend cuda $cc bench decode --model synth:llama-3.1-8b:$q --batch $bs --depth 128 \
      --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
done
step "q4_k decode, PDL = 1"
timeout 90 $B --backend cuda --config /tmp/pdl.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
  --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane, QTC_XSPLIT = 2: $g"
  timeout 40 $B --config /tmp/x2.toml gate --lane cuda --only $g --json "$O/gates-x2.jsonl" > "$O/gates-x2-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED|parity" "$O/gates-x2-$g.txt" | head -6 | cut -c1-250 | tee -a "$L"
done
step "TTFT BF16 1024, QTC_XSPLIT = 2"
timeout 60 $B --backend cuda --config /tmp/x2.toml bench ttft --model synth:llama-3.1-8b:bf16 \
  --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
step done
