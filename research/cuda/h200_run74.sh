#!/bin/bash
# Prepared in the nineteenth session (not run): where a BF16 bs=32 decode step's 6.9 ms go
# with the H200 defaults of run 72 (4,642 tok/s = 32 rows / 6.89 ms). Nsight Compute times every
# kernel of a few ungraphed decode steps (gpu__time_duration, clocks left alone); the summary
# groups them by kernel name. Then the same step's sum against the graphed step time tells the
# launch gaps that graphs + PDL leave.
# Prediction: linear layers 5.1-5.3 ms a step (run 71 table: 162.5 us a layer x 32 + LM head
# about 0.3 ms), attention 0.2-0.4 ms, norms/RoPE/SwiGLU/reduce passes 0.4-0.6 ms; sum 6.2-6.5
# ms, so about 0.4-0.7 ms of gaps.
# Usage: h200_run74.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "ncu: kernel durations of ungraphed BF16 bs=32 decode steps (after prefill)"
# The warm-up run: prefill of 32 x 128 tokens (about 1,400 launches), then 15 decode steps of
# about 350 launches; skip 2,500 and take about three steps inside them.
timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  --launch-skip 2500 --launch-count 1100 \
  $B --backend cuda --cuda-graph-max-batch 0 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
  --depth 128 --new-tokens 16 --reps 1 > "$O/ncu.csv" 2> "$O/ncu.err"
python3 - "$O/ncu.csv" <<'PY' | tee -a "$L"
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    try:
        d = float(r["gpu__time_duration.sum"])
    except (KeyError, ValueError):
        continue
    k = r.get("Kernel Name", "?").split("(")[0]
    t[k][0] += 1
    t[k][1] += d
tot = sum(v[1] for v in t.values())
print(f"{len(rows)} launches, {tot/1e3:.1f} us in all (unit as ncu printed: ns)")
for k, (n, s) in sorted(t.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"{k:40s} {n:6d} {s/1e3:10.1f} us {100*s/tot:5.1f}%")
PY
tail -3 "$O/ncu.err" | cut -c1-200 | tee -a "$L"
step done
