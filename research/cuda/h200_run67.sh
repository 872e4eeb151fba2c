#!/bin/bash
# Eighteenth session, second call. Run 66: the wgmma split-K form (QTC_SK = 3) is bit-identical
# (self-check 47 PASS, CUDA lane tiny + qwen3 24/0) but slower than the shipped forms at M = 16
# and 32 (BF16 q/o@32 29.1 us against 17.0, gate+up 146.9 against 92.3), and its time tracks the
# count of MMA batches (fence, 4 MMAs, commit, wait: about 1,200 cycles each), not the bytes, the
# ring's depth or the warpgroups an SM. Now TCK_UB units a batch (4 by default: 16 MMAs, one
# wait), x staged with four loads in flight, blocks an SM from the driver's occupancy.
# Prediction: BF16 at M = 32 with TCK_UB = 4: q/o 12-16 us, qkv 18-24, gate+up 60-80, down
# 30-40; UB = 1 as run 66. bs=32 BF16 4,030 (run 66) -> 4,300-5,000 if the table sum beats base.
# Usage: h200_run67.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk base; mk k QTC_SK=3; mk u2 QTC_SK=3 TCK_UB=2; mk u1 QTC_SK=3 TCK_UB=1
mk s16 QTC_SK=3 TCK_STAGES=16; mk u8 QTC_SK=3 TCK_UB=8 TCK_STAGES=16
step "self-check, QTC_SK = 3 (TCK_UB = 4) and UB = 8"
timeout 90 $B --config /tmp/c-k.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror|defaults" "$O/selfcheck.txt" | tail -3 | cut -c1-240 | sed "s/^/k: /" | tee -a "$L"
grep -q "portable defaults" "$O/selfcheck.txt" && { step "portable defaults: stop"; exit 1; }
ok=$(grep -c "self-check: PASS" "$O/selfcheck.txt")
timeout 60 $B --config /tmp/c-u8.toml probe --self-check 2>&1 | grep -E "self-check: |FAIL|rror" | tail -2 | cut -c1-200 | sed "s/^/u8: /" | tee -a "$L"
timeout 60 $B --config /tmp/c-k.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1
echo "CUDA lane tiny, QTC_SK = 3: $(grep -E "gates run|RED|rror" "$O/gates-tiny.txt" | head -3 | cut -c1-200)" | tee -a "$L"
step "kernel tables, M = 16, 32"
for n in base k u2 u1 s16 u8; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 16,32 \
    --kernel-shapes q/o,qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
[ "$ok" = 1 ] || { step "QTC_SK = 3 failed its self-check: no decode rows"; exit 0; }
sum() { awk '$1=="linear" && $2=="BF16" && $6==32 {s+=$7} END {print s}' "$O/k-$1.txt"; }
best=$(for n in k u2 s16 u8; do echo "$(sum $n) $n"; done | sort -n | head -1 | cut -d" " -f2)
echo "BF16 M = 32 sums: base $(sum base), best $best $(sum $best)" | tee -a "$L"
awk -v a="$(sum base)" -v b="$(sum $best)" 'BEGIN {exit !(b < a)}' || { step "no QTC_SK = 3 config beats base: no decode rows"; exit 0; }
for c in $best base; do
  step "BF16 bs=32, $c"
  timeout 110 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
step "Q8_0 bs=32, $best (run 66 base: 4,049.9)"
timeout 110 $B --backend cuda --config /tmp/c-$best.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 \
  --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
step done
