#!/bin/bash
# Eighteenth session, third call. Runs 66-67: the wgmma split-K form (QTC_SK = 3) moves about 6
# bytes a cycle an SM whatever its ring depth (4-16), batch (1-8 units), warpgroups or token
# width: the cp.async ring caps the bytes in flight. TCK_LDG = 1 loads each lane's A fragments
# of the next batch into registers (asm volatile, so they go out before the batch's MMAs), as the
# one-token family does at 97% of copy bandwidth.
# Prediction: BF16 at M = 32 with TCK_LDG = 1, TCK_UB = 4: q/o 12-16 us (shipped 17.0), gate+up
# 60-80 (92.6), down 30-40 (51.5); bs=32 BF16 4,030 -> 4,400-5,000 tok/s if the sum beats base.
# Usage: h200_run69.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk base; mk l4 QTC_SK=3 TCK_LDG=1; mk l2 QTC_SK=3 TCK_LDG=1 TCK_UB=2; mk l4w1 QTC_SK=3 TCK_LDG=1 TCK_WG=1
step "self-check, QTC_SK = 3 with TCK_LDG = 1"
timeout 90 $B --config /tmp/c-l4.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror|defaults" "$O/selfcheck.txt" | tail -3 | cut -c1-240 | sed "s/^/l4: /" | tee -a "$L"
grep -q "portable defaults" "$O/selfcheck.txt" && { step "portable defaults: stop"; exit 1; }
ok=$(grep -c "self-check: PASS" "$O/selfcheck.txt")
timeout 60 $B --config /tmp/c-l4.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1
echo "CUDA lane tiny, QTC_SK = 3, TCK_LDG = 1: $(grep -E "gates run|RED|rror" "$O/gates-tiny.txt" | head -3 | cut -c1-200)" | tee -a "$L"
step "kernel tables, M = 16, 32"
for n in base l4 l2 l4w1; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 16,32 \
    --kernel-shapes q/o,qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
[ "$ok" = 1 ] || { step "TCK_LDG = 1 failed its self-check: no decode rows"; exit 0; }
sum() { awk '$1=="linear" && $2=="BF16" && $6==32 {s+=$7} END {print s}' "$O/k-$1.txt"; }
best=$(for n in l4 l2 l4w1; do echo "$(sum $n) $n"; done | sort -n | head -1 | cut -d" " -f2)
echo "BF16 M = 32 sums: base $(sum base), best $best $(sum $best)" | tee -a "$L"
awk -v a="$(sum base)" -v b="$(sum $best)" 'BEGIN {exit !(b < a)}' || { step "no TCK_LDG config beats base: no decode rows"; exit 0; }
for c in $best base; do
  step "BF16 bs=32, $c"
  timeout 110 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
step done
