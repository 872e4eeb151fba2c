#!/bin/bash
# Prepared in the tenth session for the eleventh (not yet run). The H200 defaults now put BF16 on
# the tensor-core kernels (QTC = 1, QTC_SPLIT = 16, QTC_UNROLL = 1, QTC_GEMM = 1, run 39b).
# 1. QTC_GEMM_XASYNC = 1 (x to shared memory as f32 by cp.async, split at the B-fragment loads;
#    compile-tested only): self-check with it (3 parts and 1 part). Prediction: PASS.
# 2. The tiled form at M = 128 / 1,024, BF16 and Q8_0, XASYNC 0 against 1. Prediction: BF16
#    gate+up at 1,024 tokens from 2,262 us (1 part) / 3,046 (3 parts) to under 1,500 / 2,000.
# 3. BF16 TTFT of 1,024 tokens with XASYNC = 1, 3 parts and 1 part (run 39: 231 / 186 ms).
# 4. The CUDA lane with x in one bf16 part (QTC_XSPLIT = 1): does Level B hold against the CPU
#    reference? (decides whether BF16 may round x once, as HF's bf16 forward does).
# 5. BF16 bs=32 with the new defaults against gpt-fast, same call (target 3).
# 6. QTC_SPLIT_BIG = 4 (4 slices for matrices of 16,384 rows or more: the fused gate+up and the
#    LM head; compile-tested only): self-check (it adds a 16,384-row case), then BF16 decode bs=1
#    and 32. Prediction from run 39's kernel table (gate+up 64.6 -> 57.9 us at M = 1): bs=1
#    190 -> 196-198 tok/s, bs=32 unchanged or better (98 against 110 us at M = 32).
# Usage: h200_run41.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_GEMM_XASYNC = "1"\n' > /tmp/xa3.toml
printf '[kernel_defines]\nQTC_GEMM_XASYNC = "1"\nQTC_XSPLIT = "1"\n' > /tmp/xa1.toml
printf '[kernel_defines]\nQTC_XSPLIT = "1"\n' > /tmp/x1.toml
for c in xa3 xa1; do
  step "self-check $c"
  timeout 60 $B --config /tmp/$c.toml probe --self-check > "$O/selfcheck-$c.txt" 2>&1
  grep -E "self-check: |FAIL|rror" "$O/selfcheck-$c.txt" | tail -4 | cut -c1-220 | tee -a "$L"
done
step "kernel table, tiled form, XASYNC 0 / 1"
timeout 120 $B probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 128,1024 \
  --variants "QTC=1,QTC_Q8_0=1;QTC=1,QTC_Q8_0=1,QTC_GEMM_XASYNC=1;QTC=1,QTC_Q8_0=1,QTC_GEMM_XASYNC=1,QTC_XSPLIT=1" \
  > "$O/kbench-xasync.txt" 2>&1
grep -E "defines|gate\+up|q/o|down|rror" "$O/kbench-xasync.txt" | cut -c1-100 | tee -a "$L"
step "TTFT BF16 1024, XASYNC, 3 and 1 parts"
for c in xa3 xa1; do
  timeout 60 $B --backend cuda --config /tmp/$c.toml bench ttft --model synth:llama-3.1-8b:bf16 \
    --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "CUDA lane with x in one bf16 part"
for g in qwen3 tiny; do
  timeout 40 $B --config /tmp/x1.toml gate --lane cuda --only $g --json "$O/gates-x1.jsonl" > "$O/gates-x1-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED" "$O/gates-x1-$g.txt" | tee -a "$L"
done
step "BF16 bs=32 vs gpt-fast, defaults"
timeout 200 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 --new-tokens 128 \
  --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "QTC_SPLIT_BIG = 4: self-check, BF16 decode bs=1,32"
printf '[kernel_defines]\nQTC_SPLIT_BIG = "4"\n' > /tmp/big4.toml
timeout 90 $B --config /tmp/big4.toml probe --self-check > "$O/selfcheck-big4.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-big4.txt" | tail -4 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck-big4.txt" && timeout 100 $B --backend cuda --config /tmp/big4.toml \
  bench decode --model synth:llama-3.1-8b:bf16 --batch 1,32 --depth 128 --new-tokens 128 --reps 5 \
  --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step done
