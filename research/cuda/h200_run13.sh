#!/bin/bash
# Last device call of the fourth session: the one-token repacked kernels on 8 warps per block
# (QLIN_M1_WARPS), and the anchors now measured before memra builds its engine (the gpt-fast
# anchor ran out of memory beside memra's KV cache in run12). Rebuilds llama-bench in the
# background while the self-check and the CUDA lane (qwen3-random, tiny models) run, then bs=1
# decode at depth 128, 256 new tokens, N = 5 against llama.cpp (all dtypes) and gpt-fast (BF16).
# Usage: h200_run13.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
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
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "linear_(q8|q4_k)|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
step "wait for llama-bench"; wait; cat "$O/lcpp-done.txt" | tee -a "$L"
for d in q8_0 q4_k bf16; do
  vs=llama.cpp; [ "$d" = bf16 ] && vs=llama.cpp,gpt-fast
  step "decode bs=1 depth 128 $d vs $vs"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 --new-tokens 256 \
    --reps 5 --vs $vs --llama-bench "$LB" --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  python3 -c "import json,sys; [print(k, v.get('median'), v.get('ratio'), v.get('error','')[:300]) for l in open('$O/bench.jsonl') for r in [json.loads(l)] if r.get('dtype','').lower()=='$d'.lower() for k,v in (r.get('anchor') or {}).items()]" | tee -a "$L"
done
step done
