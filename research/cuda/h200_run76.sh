#!/bin/bash
# Twentieth session: the split-K reduce with its loads in flight (linear_tcs_reduce4: 8 slices
# loaded before the in-order adds, four rows a thread) and sample_picks with 16-byte loads and the
# argmax on the way (commit 60fcc0c), against the binary before them (0556f98).
# Run 74 (ncu, bs=32 BF16): reduces 22.3 us a layer (qkv 6.8, gate+up 9.5, down 6.0) + LM head
# 31.8 us; sample_picks 79 us a step (one load in flight a thread).
# Prediction: reduces at about 3 TB/s of their traffic: qkv 4, gate+up 6, down 3.5, LM head 25 us;
# sample_picks 8-12 us. bs=32: 6.89 -> about 6.5 ms a step, 4,640 -> 4,900 tok/s (+5%);
# bs=1: 79 -> 10 us of a 4.6 ms token, +1.5%.
# Usage: h200_run76.sh NEW OLD OUT_DIR REF
set -u
B=$1; A=$2; O=$3; REF=$4; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "self-check (new)"
timeout 90 $B probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "tuned defaults|portable|self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
for g in tiny qwen3; do
  timeout 90 $B gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
step "ncu: the new reduce and sample kernels in ungraphed BF16 bs=32 steps"
timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  --launch-skip 2500 --launch-count 1100 \
  $B --backend cuda --cuda-graph-max-batch 0 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
  --depth 128 --new-tokens 16 --reps 1 --out /tmp/ncu-rows.jsonl > "$O/ncu.csv" 2> "$O/ncu.err"
python3 - "$O/ncu.csv" <<'PY' | tee -a "$L"
import csv, sys, collections
r = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
h = r[0]; i = h.index("gpu__time_duration.sum"); k = h.index("Kernel Name"); g = h.index("Grid Size")
t = collections.defaultdict(lambda: [0, 0.0])
for row in r[2:]:
    try: d = float(row[i].replace(",", ""))
    except ValueError: continue
    t[(row[k].split("(")[0], row[g])][0] += 1; t[(row[k].split("(")[0], row[g])][1] += d
tot = sum(v[1] for v in t.values())
print(f"{sum(v[0] for v in t.values())} launches, {tot/1e3:.1f} us")
for (n, gr), (c, s) in sorted(t.items(), key=lambda kv: -kv[1][1]):
    print(f"{n:28s} {gr:14s} {c:5d} {s/c/1e3:8.1f} us {100*s/tot:5.1f}%")
PY
gzip -f "$O/ncu.csv"
step "bench --compare (bs=32 x 128 and bs=1 x 256 new tokens, BF16 8B), new vs old interleaved"
timeout 330 $B --backend cuda bench decode --model synth:llama-3.1-8b:bf16 --compare "$REF" --against "$A" \
  --reps 5 --out "$O/compare.jsonl" > "$O/compare.txt" 2>&1
echo "rc $?" >> "$O/compare.txt"
grep -vE "INFO|WARN" "$O/compare.txt" | tail -8 | cut -c1-220 | tee -a "$L"
step "bs=32 with ATTN_HEADS = 4 (new binary, N = 3)"
printf '[kernel_defines]\nATTN_HEADS = "4"\n' > /tmp/c-ah4.toml
timeout 100 $B --backend cuda --config /tmp/c-ah4.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
  --new-tokens 128 --reps 3 --out "$O/ah4.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
step done
