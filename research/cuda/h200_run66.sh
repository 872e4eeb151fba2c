#!/bin/bash
# Eighteenth session, first call: the wgmma split-K form (QTC_SK = 3, linear_tck_* in
# kernels/linear_tcw.cu) for batched decode, and the shipped defaults (run65's check, folded in).
# Why: at M = 32 the one-token family reads the weights at 40-60% of copy bandwidth (x re-read
# from L2 by every block: about twice the weights' bytes for the 4096-row matrices) and the
# mma.sync split-K form stalls between short load groups. The new form: a block is one K slice and
# a run of 64-row groups, x split once into shared memory, per-warp cp.async rings of the weights,
# one m64n32k16 (or n16) per k-half and part, slice sums reduced in order by linear_tcs_reduce.
# Prediction (BF16 at M = 32, us; run 54's shipped: q/o 16.95, qkv 30.60, gate+up 92.76, down
# 51.05): q/o 10-12, qkv 14-18, gate+up 60-70, down 30-36; BF16 bs=32 4,064 -> 4,900-5,400 tok/s;
# Q8_0 gate+up at M = 32 90 -> 40-55 us, Q8_0 bs=32 4,036 -> 5,000-6,000 tok/s.
# The first try of this call (binary 70a1602) ran the portable defaults: that build embedded no
# defaults file (harness/build.rs read a path fixed when the script was compiled for the CI
# clone, gone since; fixed in 3e90c4c). Its numbers are not kept; the call stops now unless the
# H200 file is in use.
# Usage: h200_run66.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk base; mk k QTC_SK=3; mk k4 QTC_SK=3 TCK_STAGES=4; mk k16 QTC_SK=3 TCK_STAGES=16
mk k1 QTC_SK=3 TCK_WG=1; mk k3 QTC_SK=3 TCK_WG=3
step "self-check, shipped defaults (no config) and QTC_SK = 3"
timeout 90 $B probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror|defaults" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | sed "s/^/shipped: /" | tee -a "$L"
grep -q "portable defaults" "$O/selfcheck.txt" && { step "portable defaults: stop"; exit 1; }
timeout 90 $B --config /tmp/c-k.toml probe --self-check > "$O/selfcheck-k.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-k.txt" | tail -4 | cut -c1-240 | sed "s/^/k: /" | tee -a "$L"
ok=$(grep -c "self-check: PASS" "$O/selfcheck-k.txt")
for c in k1; do
  timeout 60 $B --config /tmp/c-$c.toml probe --self-check 2>&1 | grep -E "self-check: |FAIL|rror" | tail -2 | cut -c1-200 | sed "s/^/$c: /" | tee -a "$L"
done
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-k.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, QTC_SK = 3: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
step "kernel tables, M = 16, 32"
for n in base k k4 k16 k1; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 16,32 \
    --kernel-shapes q/o,qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
[ "$ok" = 1 ] || { step "QTC_SK = 3 failed its self-check: no decode rows"; exit 0; }
best=$(for n in k k4 k16 k1; do awk -v n=$n '$1=="linear" && $6==32 {s+=$7} END {print s, n}' "$O/k-$n.txt"; done | sort -n | head -1 | cut -d" " -f2)
echo "fastest QTC_SK = 3 config by the M = 32 sum: $best" | tee -a "$L"
for c in base $best base $best; do
  step "BF16 bs=32, $c"
  timeout 110 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
for c in base $best; do
  step "Q8_0 bs=32, $c"
  timeout 110 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | cut -c1-200 | tee -a "$L"
done
step done
