#!/bin/bash
# Prepared in the twenty-third session (not run). Two questions left by run 92:
# (a) QTC_GEMM_MIN_BIG: gate+up (28,672 rows) and the lm-head (128,256) give the GEMM 224 and
#     1,002 blocks of 128 rows, so it may win from 128 tokens (run 92: gate+up at M = 128 183 us
#     on the GEMM, 222 on the split-K form) while the 4,096-row matrices stay split-K to 255.
#     The lm-head at 33-255 tokens falls back to the one-token form (its split-K partials pass
#     the scratch), a pass over its 1 GB per 32 tokens; not yet timed at those M.
# (b) The self-check now adds M = 258 where the GEMM starts at 256 (the H200 defaults), so the
#     tiled form is checked against M = 1 again, and runs the split-K reduces (SwiGLU, RoPE +
#     KV append) at M = 33 and 130 with their epilogues required.
# (c) From 64 tokens, a matrix whose split-K partials pass the scratch (the lm-head from 33
#     tokens, gate+up from 147, qkv from 171) now takes the GEMM instead of the one-token form
#     (one pass over the weights instead of one per 32 tokens): bs=192 is new, bs=64 and 128
#     change by the lm-head (binary of this session's last commit against run 93's 5,602 at 64).
# 1. Self-check with the shipped defaults, then with QTC_GEMM_MIN_BIG = 128.
# 2. Kernel table BF16, gate+up and lm-head, M = 32 / 64 / 128 / 192 (32: the lm-head of a bs=32 step,
#    not yet timed), QTC_GEMM_MIN_BIG 0 / 64 / 128.
# 3. Decode BF16 bs 64 / 128 / 192, QTC_GEMM_MIN_BIG 0 / 128 / 0 / 128 (N = 3).
# Prediction: bs=128 +5% (gate+up -39 us a layer, -1.25 ms of a 21 ms step); bs=64 unchanged.
# If so: QTC_GEMM_MIN_BIG = 128 in boards/defaults/nvidia-h200.toml.
# Usage: h200_run94.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for g in 0 64 128; do printf '[kernel_defines]\nQTC_GEMM_MIN_BIG = "%s"\n' $g > /tmp/c-b$g.toml; done
for c in b0 b128; do
  step "self-check, $c"
  timeout 150 $B --config /tmp/c-$c.toml probe --self-check > "$O/selfcheck-$c.txt" 2>&1
  grep -E "self-check: |linear_gated|qkv_rope|FAIL|rror" "$O/selfcheck-$c.txt" | tail -6 | cut -c1-220 | tee -a "$L"
  grep -q "self-check: PASS" "$O/selfcheck-$c.txt" || { step "self-check not PASS: stop"; exit 1; }
done
step "kernel table"
timeout 150 $B probe --bench-kernels --kernel-tokens 32,64,128,192 --kernel-dtypes bf16 --kernel-shapes gate+up,lm-head \
  --variants "QTC_GEMM_MIN_BIG=0;QTC_GEMM_MIN_BIG=64;QTC_GEMM_MIN_BIG=128" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | sed -E '/defines/{s/.*/& /;s/^kernels, defines \{.*$/echo "kernels, defines: $(echo "&" | grep -oE "(QTC_GEMM_MIN_BIG|QTC_GEMM_MIN)=[0-9]+" | tr "\\n" " ")"/e}' | cut -c1-110 | tee -a "$L"
for c in b0 b128 b0 b128; do
  step "decode bf16 bs 64/128/192, $c"
  timeout 150 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 64,128,192 \
    --depth 128 --new-tokens 128 --reps 3 --out "$O/gemm-big.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" \
    | cut -c1-160 | tee -a "$L"
done
step done
