#!/bin/bash
# GPU machine: where one prefill's GPU time goes. Runs `memra bench ttft` (one prompt, no warm-up)
# under Nsight Compute (durations only, clocks left alone; kernels serialized, so the sum is the
# kernels' own time without launch gaps), then sums gpu__time_duration by kernel name over the
# launches from the first embedding kernel (the prefill's first) up to the next one.
# Usage: ncu_prefill.sh MEMRA_BINARY OUT_DIR MODEL PROMPT_LEN [COUNT [MEMRA_ARGS...]]
set -u
B=$1; O=$2; M=$3; P=$4; COUNT=${5:-4000}; shift 5 2>/dev/null || shift $#
ncu --clock-control none --csv --metrics gpu__time_duration.sum --launch-count "$COUNT" \
  $B --backend cuda "$@" bench ttft --model "$M" --prompt-len "$P" --reps 1 --warmup 0 \
  --out /tmp/ncu-ttft.jsonl > "$O/ncu-prefill.csv" 2> "$O/ncu-prefill.err"
python3 - "$O/ncu-prefill.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no ncu rows")
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
seq = []
for r in rows[1:]:
    if r[v] in ("", "Metric Value"): continue
    x = float(r[v].replace(",", "")); x = x / 1000 if r[u] in ("nsecond", "ns") else (x * 1000 if r[u] in ("msecond", "ms") else x)
    seq.append((r[k].split("(")[0], x))
starts = [i for i, (n, _) in enumerate(seq) if n.startswith("embed")]
if not starts:
    sys.exit(f"no embedding kernel among {len(seq)} launches: raise COUNT")
end = starts[1] if len(starts) > 1 else len(seq)
t = collections.defaultdict(float); n = collections.Counter()
for name, x in seq[starts[0]:end]:
    t[name] += x; n[name] += 1
tot = sum(t.values())
print(f"{'kernel':<30}{'launches':>9}{'ms':>9}{'share':>7}")
for name, x in sorted(t.items(), key=lambda kv: -kv[1]):
    print(f"{name:<30}{n[name]:>9}{x/1000:>9.2f}{100*x/tot:>6.1f}%")
print(f"{'all':<30}{sum(n.values()):>9}{tot/1000:>9.2f}  (launches {starts[0]}..{end} of {len(seq)})")
PY
