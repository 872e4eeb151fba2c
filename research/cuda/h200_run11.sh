#!/bin/bash
# Device call A of two (fourth session): the repacked Q8_0/Q4_K one-token kernels stage all of x
# once per block and walk row groups with no further barrier. Builds llama-bench for call B in the
# background (under target/, kept while the machine stays warm), meanwhile checks correctness
# (self-check, CUDA lane on qwen3-random, the tiny models and the 8B shapes) and times the linear
# kernels (exact and QLIN_FACTOR=1). Usage: h200_run11.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
(
  t=$(date +%s); mkdir -p target/lcpp && tar -C target/lcpp -xzf target/parts/llamacpp-src.tar.gz
  cmake -S target/lcpp/llama.cpp -B target/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
    > "$O/lcpp-cmake.log" 2>&1 && nice cmake --build target/lcpp/build --target llama-bench -j 14 > "$O/lcpp-build.log" 2>&1
  echo "llama-bench build rc $? in $(( $(date +%s) - t )) s" > "$O/lcpp-done.txt"
) &
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_(q8|q4_k|bf16)|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only llama-3.1-8b --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED|GREEN " | tee -a "$L"
step kbench; $B probe --bench-kernels --variants "QLIN_FACTOR=0;QLIN_FACTOR=1;QLIN_FACTOR=1,LIN_WARPS=8" > "$O/kbench.txt" 2>&1
grep -E "defines|  1  " "$O/kbench.txt" | grep -v BF16 | tee -a "$L" > /dev/null
step "wait for llama-bench"; wait; cat "$O/lcpp-done.txt" | tee -a "$L"; ls -la target/lcpp/build/bin/llama-bench 2>&1 | tee -a "$L"
step done
