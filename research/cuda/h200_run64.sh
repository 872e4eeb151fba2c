#!/bin/bash
# Seventeenth session, last call (about 400 s of device time left). Run 63: QTC_GEMM = 3 with
# the unrolled copies (TCW_WG = 2, cp.async) takes BF16 gate+up at M = 1,024 from 2,170 to
# 1,294 us and TTFT of 1,024 tokens from 180.5 to 127.8 ms. Before it becomes the H200
# default: the CUDA lane with exactly that config, and Q8_0 TTFT against the shipped form.
# Usage: h200_run64.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk g1; mk w2 QTC_GEMM=3
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-w2.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, QTC_GEMM = 3: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
step "Q8_0 TTFT 1,024 (the first call makes the checkpoint)"
timeout 150 $B --backend cuda --config /tmp/c-g1.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 --reps 3 \
  --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
step "Q8_0 TTFT 1,024, w2"
timeout 60 $B --backend cuda --config /tmp/c-w2.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 --reps 3 \
  --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
step done
