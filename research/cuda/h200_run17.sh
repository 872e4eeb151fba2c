#!/bin/bash
# Last device call of the fifth session: QLIN_FACTOR=1 as the default (self-check adapted), the
# norm self-check on the float4 path. Rebuilds llama-bench in the background while the self-check,
# the CUDA lane (qwen3-random, tiny models) and the cuda-graphs canaries run; then bs=1 decode on
# the 8B shape (depth 128, 256 new tokens, N = 5) against llama.cpp in the same call for Q8_0, Q4_K
# and BF16; then bs=32 BF16 aggregate decode (no anchor; gpt-fast failed in run14).
# Usage: h200_run17.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
LB=$PWD/target/lcpp/build/bin/llama-bench
(
  t=$(date +%s)
  if [ ! -x "$LB" ]; then
    mkdir -p target/lcpp && tar -C target/lcpp -xzf target/parts/llamacpp-src.tar.gz
    cmake -S target/lcpp/llama.cpp -B target/lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
      > "$O/lcpp-cmake.log" 2>&1 && nice cmake --build target/lcpp/build --target llama-bench -j 14 > "$O/lcpp-build.log" 2>&1
  fi
  echo "llama-bench ready (rc $?) after $(( $(date +%s) - t )) s" > "$O/lcpp-done.txt"
) &
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_q|norm|self-check|FAIL|no  " "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
step "wait for llama-bench"; wait; cat "$O/lcpp-done.txt" | tee -a "$L"
for d in q8_0 q4_k bf16; do
  step "decode bs=1 depth 128 $d vs llama.cpp"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 \
    --reps 5 --vs llama.cpp --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
python3 -c "import json; [print(r['dtype'], round(r['median'],1), k, v.get('median'), v.get('ratio'), (v.get('error') or '')[:200]) for l in open('$O/bench.jsonl') for r in [json.loads(l)] for k,v in (r.get('anchor') or {}).items()]" | tee -a "$L"
step "decode bs=32 depth 128 bf16"
$B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 --new-tokens 128 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
