#!/bin/bash
# Fourteenth session, second call (right after run 52, which stashed target/parts/smol.00 in
# /tmp on the same warm machine). #5 on the GPU with this build's drafter and policy and the
# H200 defaults' speculation constants (run 48: verify base 1.51 + 0.095 a row; run 37 ran
# before them, with the portable 0.12 row cost): SmolLM2-135M-Instruct (Q4_1 file joined from
# the two parts, checked by sha256, re-quantized to Q8_0), `bench spec` n-gram k = 4, 8 over
# every prompt of the three classes, to end-of-sequence (<= 256) and exactly 128 new tokens,
# N = 3 interleaved plain/spec rounds; layer-skip (first 15 of 30 layers, k = 4) on the code
# class. Prediction: n-gram within 5% of run 37 (the policy prices a verify at 1.5 decode rows
# where SmolLM2's costs about 1.1, so it drafts a little shorter: code to EOS 1.41-1.45x,
# agentic 2.5-2.8x); layer-skip below 1x (run 24: acceptance near 0 at half depth) but above
# 0.9x (the policy stops drafting).
# Usage: h200_run53.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
SM=/tmp/smol-q4_1.gguf
if cat /tmp/smol.00 target/parts/smol.01 > $SM 2>/dev/null && \
   echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $SM" | sha256sum -c - | tee -a "$L"; then
  $B quantize $SM /tmp/smol-q8_0.gguf --force | tee -a "$L"
  $B --backend cuda serve --model /tmp/smol-q8_0.gguf --print-config 2>&1 | grep -E "spec_" | tee -a "$L"
  step "spec smol q8_0, to end-of-sequence"
  timeout 150 $B --backend cuda bench spec --model /tmp/smol-q8_0.gguf --method ngram --k 4,8 --reps 3 \
    --new-tokens 256 --stop-at-eos --out "$O/bench.jsonl" 2>&1 | tail -7 | cut -c1-260 | tee -a "$L"
  step "spec smol q8_0, 128 new tokens"
  timeout 100 $B --backend cuda bench spec --model /tmp/smol-q8_0.gguf --method ngram --k 4,8 --reps 3 \
    --new-tokens 128 --out "$O/bench.jsonl" 2>&1 | tail -7 | cut -c1-260 | tee -a "$L"
  step "spec smol q8_0, layerskip:15 k = 4, code, to end-of-sequence"
  timeout 80 $B --backend cuda bench spec --model /tmp/smol-q8_0.gguf --method layerskip:15 --k 4 --reps 3 \
    --class code --new-tokens 256 --stop-at-eos --out "$O/bench.jsonl" 2>&1 | tail -2 | cut -c1-260 | tee -a "$L"
else
  step "smol parts missing: spec skipped"
fi
step done
