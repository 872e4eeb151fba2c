#!/bin/bash
# Prepared in the eleventh session, revised in the twelfth: part a runs gpt-fast while llama.cpp
# builds, then llama.cpp in the same call. Carry target/parts/memra.gz and
# target/parts/llamacpp-src.tar.gz (the llama.cpp tree vendored by the llama-cpp-python 0.3.36
# sdist, without models, docs, tests, examples, app and the other GPU backends; it configures
# with the flags below). Two parts, one call each (back to back keeps /tmp and the build):
#   part a: issue #8's synth speed (16 GB BF16 GGUF, "under a minute"), then target 1 of #7:
#           BF16 bs=1, 128-token prompt, 256 new tokens, against gpt-fast and llama.cpp F16... in
#           the same call (llama.cpp reads the BF16 GGUF as BF16; DEVICE.md's anchor was F16).
#   part b: target 2 (Q8_0, Q4_K bs=1 against llama.cpp) and target 3 (BF16 bs=32 against
#           gpt-fast), same call each.
# Usage: h200_run45.sh MEMRA OUT_DIR a|b
set -u
B=$1; O=$2; P=${3:-a}; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
LB=/tmp/lcpp/build/bin/llama-bench
if [ ! -x $LB ]; then
  (
    mkdir -p /tmp/lcpp && tar -C /tmp/lcpp -xzf target/parts/llamacpp-src.tar.gz
    cmake -S /tmp/lcpp/llama.cpp -B /tmp/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release > "$O/lcpp-cmake.log" 2>&1 \
      && nice cmake --build /tmp/lcpp/build --target llama-bench -j 12 > "$O/lcpp-build.log" 2>&1
    echo "llama-bench rc $?" > "$O/lcpp-done.txt"
  ) &
fi
# Waits for the llama.cpp build at most until $1 seconds into the call; prints whether it is there.
lcpp_ready() {
  [ -x $LB ] && return 0
  while [ ! -f "$O/lcpp-done.txt" ] && [ $(( $(date +%s) - t0 )) -lt $1 ]; do sleep 5; done
  cat "$O/lcpp-done.txt" 2>/dev/null | tee -a "$L"; [ -x $LB ]
}
if [ "$P" = a ]; then
  step "synth: llama-3.1-8b bf16 gguf (the 16 GB write)"
  rm -rf /tmp/synth8b
  s0=$(date +%s.%N)
  timeout 120 $B synth --shape llama-3.1-8b --dtype bf16 \
    --format gguf --seed 0 --out /tmp/synth8b 2>&1 | grep -E "wrote|rror" | tee -a "$L"
  echo "synth wall $(awk "BEGIN{print $(date +%s.%N) - $s0}") s" | tee -a "$L"
  du -sb /tmp/synth8b | tee -a "$L"; rm -rf /tmp/synth8b
  step "BF16 bs=1, 256 new tokens, vs gpt-fast"
  timeout 300 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128 \
    --new-tokens 256 --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 \
    | grep -E "^decode|anchor|rror" | tee -a "$L"
  step "waiting for llama-bench (until 470 s)"
  if lcpp_ready 470; then
    step "BF16 bs=1, 256 new tokens, vs llama.cpp"
    timeout 110 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 1 --depth 128 \
      --new-tokens 256 --reps 5 --vs llama.cpp --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 \
      | grep -E "^decode|anchor|rror" | tee -a "$L"
  fi
else
  lcpp_ready 300 || echo "no llama-bench" | tee -a "$L"
  for q in q8_0 q4_k; do
    step "$q bs=1, 256 new tokens, vs llama.cpp"
    timeout 120 $B --backend cuda bench decode --model synth:llama-3.1-8b:$q --batch 1 --depth 128 \
      --new-tokens 256 --reps 5 --vs llama.cpp --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 \
      | grep -E "^decode|anchor|rror" | tee -a "$L"
  done
  step "BF16 bs=32 vs gpt-fast"
  timeout 250 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|anchor|rror" | tee -a "$L"
fi
step done
