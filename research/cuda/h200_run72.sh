#!/bin/bash
# Nineteenth session, last call: run 71's "ship" set with three warpgroups a block (TCK_WG = 3:
# the best BF16 kernel table of run 71, gate+up at M = 32 81.0 -> 77.2 us, down 45.9 -> 43.6),
# checked (self-check; CUDA lane on the models the device holds: tiny, qwen3), then target 3
# against the gpt-fast recipe in the same call (BF16 bs=32, 128 new tokens, N = 5).
# Prediction: 4,650-4,700 tok/s (run 71 ship 4,591-4,596; +1-2% from the kernel sums); gpt-fast
# 5,700-6,000 (run 56: 0.713x at 4,086): about 0.80x.
# Usage: h200_run72.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk ship QTC_SK=3 TCK_BULK=1 TCK_MIN_MB=40 TCK_Q8_0=0; mk w3 QTC_SK=3 TCK_BULK=1 TCK_MIN_MB=40 TCK_Q8_0=0 TCK_WG=3
step "self-check and CUDA lane (tiny, qwen3), w3"
timeout 60 $B --config /tmp/c-w3.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "tuned defaults|portable|self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "portable defaults" "$O/selfcheck.txt" && { step "portable defaults: stop"; exit 1; }
c=w3
grep -q "self-check: PASS" "$O/selfcheck.txt" || c=ship
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-$c.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, $c: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
  grep -q "0 failed" "$O/gates-$g.txt" || c=ship
done
step "BF16 bs=32 vs gpt-fast, $c"
timeout 330 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 5 --vs gpt-fast --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|anchor|rror" | cut -c1-300 | tee -a "$L"
step done
