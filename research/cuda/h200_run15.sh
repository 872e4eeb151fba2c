#!/bin/bash
# Second device call of the fifth session: the decode attention rewrite (4 lanes per key, float4
# loads, loads issued before sums, V per float4 column) and rope(q, k) + KV append fused into one
# launch. Correctness first (self-check, CUDA lane on qwen3-random and the tiny models, the
# cuda-graphs canaries), then bs=1 decode on the 8B shape (depth 128, 256 new tokens, N = 5, graphs
# on) for each dtype, then where one Q8_0 step's GPU time goes (ncu, durations only, clocks and
# caches left alone, graphs off so every kernel is its own launch).
# Usage: h200_run15.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "attn|rope|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check failed: stop"; exit 1; }
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
for d in q8_0 bf16 q4_k; do
  step "decode bs=1 depth 128 $d"
  $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
    --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "ncu q8_0 step"
ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 1200 \
  $B --backend cuda --cuda-graph-max-batch 0 bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 \
  --new-tokens 64 --reps 1 --out /tmp/ncu-bench.jsonl > "$O/ncu.csv" 2> "$O/ncu.err"
python3 - "$O/ncu.csv" <<'PY' | tee -a "$L"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
t = collections.defaultdict(float); n = collections.Counter()
for r in rows[1:]:
    if r[v] in ("", "Metric Value"): continue
    x = float(r[v].replace(",", "")); x = x / 1000 if r[u] in ("nsecond", "ns") else (x * 1000 if r[u] in ("msecond", "ms") else x)
    name = r[k].split("(")[0]; t[name] += x; n[name] += 1
tot = sum(t.values())
steps = sum(c for k, c in n.items() if k.startswith("embed_")) or 1
print(f"{'kernel':<28}{'launches':>9}{'us total':>11}{'us/step':>10}{'share':>7}")
for name, x in sorted(t.items(), key=lambda kv: -kv[1]):
    print(f"{name:<28}{n[name]:>9}{x:>11.1f}{x/steps:>10.1f}{100*x/tot:>6.1f}%")
print(f"{'all':<28}{sum(n.values()):>9}{tot:>11.1f}{tot/steps:>10.1f}  over {steps} steps (embedding launches)")
PY
step done
