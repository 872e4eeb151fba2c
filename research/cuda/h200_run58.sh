#!/bin/bash
# Fifteenth session. QTC_M1_PREFETCH (new): the one-token tensor-core entries ask L2 for their
# first units before griddepcontrol.wait. Run 57 left 0.15 ms a bs=1 Q8_0 step unexplained by the
# kernels' isolated times. Prediction: Q8_0 bs=1 257 -> 262-268 tok/s with 2-4 units (half to all
# of the gap), BF16 bs=1 a smaller gain (its one-token entries already reach 98% of copy on the
# big matrices). No bits change: the self-check must PASS with it.
# Usage: h200_run58.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk p0; mk p2 QTC_M1_PREFETCH=2; mk p4 QTC_M1_PREFETCH=4; mk p8 QTC_M1_PREFETCH=8
step "self-check with QTC_M1_PREFETCH = 4"
timeout 90 $B --config /tmp/c-p4.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
for r in 1 2; do
  for c in p0 p2 p4 p8; do
    step "Q8_0 bs=1, 128 new tokens, $c, round $r"
    timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
done
for c in p0 p4 p0 p4; do
  step "BF16 bs=1, 128 new tokens, $c"
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
done
step done
