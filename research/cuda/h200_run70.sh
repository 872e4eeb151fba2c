#!/bin/bash
# Prepared in the eighteenth session (not run): the wgmma split-K form (QTC_SK = 3) with its runs
# rounded down to one wave (run 69's qkv at M = 32 ran two), the register variant (TCK_LDG = 1)
# against the new bulk-copy variant (TCK_BULK = 1: one cp.async.bulk a warp and batch of TCK_UB
# units into the warp's ring, on the warp's own mbarrier), and the shipped forms.
# Prediction: TCK_BULK with 16 stages (4 batches of 4 units, 12 KiB a warp in flight) reads the
# weights near copy bandwidth: BF16 at M = 32 q/o 11-14 us, qkv 15-20, gate+up 60-75, down 32-40
# (shipped 17.0 / 30.5 / 92.3 / 51.4); register variant at M = 32 qkv 42 -> about 27.
# Usage: h200_run70.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk base; mk l4 QTC_SK=3 TCK_LDG=1; mk b8 QTC_SK=3 TCK_BULK=1; mk b16 QTC_SK=3 TCK_BULK=1 TCK_STAGES=16
mk b16u2 QTC_SK=3 TCK_BULK=1 TCK_STAGES=16 TCK_UB=2; mk b16w1 QTC_SK=3 TCK_BULK=1 TCK_STAGES=16 TCK_WG=1
step "self-check, QTC_SK = 3 with TCK_BULK = 1"
timeout 90 $B --config /tmp/c-b16.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror|defaults" "$O/selfcheck.txt" | tail -3 | cut -c1-240 | sed "s/^/b16: /" | tee -a "$L"
grep -q "portable defaults" "$O/selfcheck.txt" && { step "portable defaults: stop"; exit 1; }
ok=$(grep -c "self-check: PASS" "$O/selfcheck.txt")
timeout 60 $B --config /tmp/c-b8.toml probe --self-check 2>&1 | grep -E "self-check: |FAIL|rror" | tail -2 | cut -c1-200 | sed "s/^/b8: /" | tee -a "$L"
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-b16.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, QTC_SK = 3, TCK_BULK = 1: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
step "kernel tables, M = 16, 32"
for n in base l4 b8 b16 b16u2 b16w1; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 16,32 \
    --kernel-shapes q/o,qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
[ "$ok" = 1 ] || { step "TCK_BULK = 1 failed its self-check: no decode rows"; exit 0; }
sum() { awk '$1=="linear" && $2=="BF16" && $6==32 {s+=$7} END {print s}' "$O/k-$1.txt"; }
best=$(for n in l4 b8 b16 b16u2 b16w1; do echo "$(sum $n) $n"; done | sort -n | head -1 | cut -d" " -f2)
echo "BF16 M = 32 sums: base $(sum base), best $best $(sum $best)" | tee -a "$L"
awk -v a="$(sum base)" -v b="$(sum $best)" 'BEGIN {exit !(b < a)}' || { step "no QTC_SK = 3 config beats base: no decode rows"; exit 0; }
for c in $best base $best base; do
  step "BF16 bs=32, $c"
  timeout 110 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
step done
