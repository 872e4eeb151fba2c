#!/bin/bash
# Prepared in the eighth session (not yet run): the device data issue #8 still lacks, and the
# gpt-fast anchor by research/anchors/gpt_fast_decode.py (our implementation of the recipe; the
# HF-generate route crashed inside torch inductor three times). Run after h200_run33.sh, or alone.
# Builds llama-bench in the background (target/parts/llamacpp-src.tar.gz must be carried).
# 1. gpt_fast_decode.py --check on the 8B BF16 shape (logits and greedy tokens against
#    transformers), then bench decode BF16 bs=1 and bs=32 --vs gpt-fast,hf-eager (+ llama.cpp at
#    bs=1), N = 5 (targets 1 and 3 of #7).
# 2. bench ttft 512, 1,024, 4,096, 16,384 for Q8_0 and BF16 --vs llama.cpp, N = 5.
# 3. bench serve Poisson (rates 4, 16 req/s) and bench prefix, Q8_0, N = 5.
# Part 2 of h200_run34.sh (ninth session): TTFT against llama.cpp, Poisson serve, prefix.
# Usage: h200_run35.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
LB=/tmp/lcpp/build/bin/llama-bench
[ -x $LB ] || (
  mkdir -p /tmp/lcpp && tar -C /tmp/lcpp -xzf target/parts/llamacpp-src.tar.gz
  cmake -S /tmp/lcpp/llama.cpp -B /tmp/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
    > "$O/lcpp-cmake.log" 2>&1 && nice cmake --build /tmp/lcpp/build --target llama-bench -j 12 > "$O/lcpp-build.log" 2>&1
  echo "llama-bench rc $?" > "$O/lcpp-done.txt"
) &
wait; cat "$O/lcpp-done.txt" 2>/dev/null | tee -a "$L"
for d in q8_0 bf16; do
  step "ttft $d vs llama.cpp"
  timeout 200 $B --backend cuda bench ttft --model synth:llama-3.1-8b:$d --reps 5 --vs llama.cpp --llama-bench "$LB" \
    --out "$O/bench.jsonl" 2>&1 | tail -4 | tee -a "$L"
done
step "serve Poisson q8_0"
timeout 300 $B --backend cuda bench serve --model synth:llama-3.1-8b:q8_0 --rate 4,16 --requests 32 --input-len 128 \
  --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -6 | tee -a "$L"
step "prefix q8_0"
timeout 200 $B --backend cuda bench prefix --model synth:llama-3.1-8b:q8_0 --prompt-len 1024,4096 --reps 5 \
  --out "$O/bench.jsonl" 2>&1 | tail -6 | tee -a "$L"
step done
