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
# Ninth session: split in two calls (run 33 showed one call cannot hold it all): this file is
# part 1 (gpt-fast check, decode anchors); h200_run35.sh is part 2 (TTFT, serve, prefix).
# Usage: h200_run34.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
LB=/tmp/lcpp/build/bin/llama-bench
(
  mkdir -p /tmp/lcpp && tar -C /tmp/lcpp -xzf target/parts/llamacpp-src.tar.gz
  cmake -S /tmp/lcpp/llama.cpp -B /tmp/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
    > "$O/lcpp-cmake.log" 2>&1 && nice cmake --build /tmp/lcpp/build --target llama-bench -j 12 > "$O/lcpp-build.log" 2>&1
  echo "llama-bench rc $?" > "$O/lcpp-done.txt"
) &
step "the gpt-fast implementation checked against transformers on the 8B BF16 shape"
HF=/tmp/hf8b; timeout 120 $B synth --shape llama-3.1-8b --dtype bf16 --format safetensors --seed 0 --out $HF \
  2>&1 | tail -1 | tee -a "$L"
timeout 300 python3 research/anchors/gpt_fast_decode.py --model "$HF" --depth 128 --new-tokens 32 --reps 2 --check \
  2>&1 | grep -v Loading | tail -3 | tee -a "$L"
wait; cat "$O/lcpp-done.txt" | tee -a "$L"
for bs in 1 32; do
  vs=gpt-fast; [ $bs = 1 ] && vs=gpt-fast,hf-eager,llama.cpp
  step "decode bf16 bs=$bs vs $vs"
  timeout 300 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch $bs --depth 128 --new-tokens 256 \
    --reps 5 --vs $vs --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
step done
