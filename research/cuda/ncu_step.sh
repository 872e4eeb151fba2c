#!/bin/bash
# GPU machine: where one bs=1 decode step's GPU time goes. Runs `memra bench decode` on a model
# under Nsight Compute (durations only, clocks left alone), skips the first SKIP launches (prefill
# and warm-up), records COUNT launches, and sums gpu__time_duration by kernel name.
# Environment: BATCH (default 1), GLOBAL (memra's global flags, e.g. "--kv-cache-dtype f16").
# Usage: ncu_step.sh MEMRA_BINARY OUT_DIR MODEL [SKIP [COUNT]]
set -u
B=$1; O=$2; M=$3; SKIP=${4:-3000}; COUNT=${5:-1400}
ncu --clock-control none --csv --metrics gpu__time_duration.sum --launch-skip "$SKIP" \
  --launch-count "$COUNT" $B --backend cuda ${GLOBAL:-} bench decode --model "$M" --batch ${BATCH:-1} --depth 128 \
  --new-tokens 64 --reps 1 --out /tmp/ncu-bench.jsonl > "$O/ncu.csv" 2> "$O/ncu.err"
python3 - "$O/ncu.csv" <<'PY'
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
