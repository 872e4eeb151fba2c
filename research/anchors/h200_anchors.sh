#!/bin/bash
# GPU machine, one call: the anchors of issue 7 measured beside memra on the same random weights.
# Builds llama-bench from llama.cpp's source (carried as target/parts/llamacpp-src.tar.gz: the
# `vendor/llama.cpp` tree of the llama-cpp-python sdist without models/, docs/, tests/, examples/
# and the other GPU backends, about 4 MB; nothing of it is committed), then for BF16, Q8_0 and Q4_K
# at the Llama-3.1-8B shape runs `memra bench decode --vs ...` (bs=1, depth 128, 256 new tokens,
# N = 5): llama.cpp for every dtype, hf-eager and gpt-fast for BF16 (they need an HF checkpoint).
# Usage: research/anchors/h200_anchors.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step "build llama-bench"
t=$(date +%s)
mkdir -p /tmp/lcpp && tar -C /tmp/lcpp -xzf target/parts/llamacpp-src.tar.gz
cmake -S /tmp/lcpp/llama.cpp -B /tmp/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
  > "$O/lcpp-cmake.log" 2>&1 && cmake --build /tmp/lcpp/build --target llama-bench -j 16 > "$O/lcpp-build.log" 2>&1
LB=/tmp/lcpp/build/bin/llama-bench
[ -x "$LB" ] || { echo "llama-bench did not build"; tail -20 "$O/lcpp-build.log"; }
echo "built in $(( $(date +%s) - t )) s" | tee -a "$L"
for d in bf16 q8_0 q4_k; do
  vs=llama.cpp; [ "$d" = bf16 ] && vs=llama.cpp,gpt-fast,hf-eager
  step "decode bs=1 depth 128 $d vs $vs"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 \
    --reps 5 --vs $vs --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 | tail -4 | tee -a "$L"
done
step done
