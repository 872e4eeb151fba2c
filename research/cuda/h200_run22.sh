#!/bin/bash
# Last device call of the sixth session. The self-check with the defaults and with QTC=1 (now
# single-buffered again, QTC_DB=0, with a unit sum per MMA chain); the one-token lane kernels
# (Q8_0, Q4_K) at M = 1 with an L2 prefetch of the first row group before x is staged
# (QLIN_M1_PREFETCH) and fewer blocks per SM (QLIN_M1_BLOCKS); the set with the least M = 1 time
# over the 8B shapes runs the tiny-model CUDA lane and bs=1 Q8_0 decode against the defaults;
# then `memra tune --what spec` with QTC=1 on the 8B Q8_0 shape (verify cost in decode rows).
# Usage: h200_run22.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step "self-check"; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "self-check|FAIL|rror" "$O/selfcheck.txt" | tee -a "$L"
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
$B --config /tmp/tc.toml probe --self-check > "$O/selfcheck-tc.txt" 2>&1; grep -E "_tc|self-check|FAIL|rror" "$O/selfcheck-tc.txt" | tee -a "$L"
step kbench; $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0,q4_k \
  --variants "QLIN_M1_PREFETCH=0;QLIN_M1_PREFETCH=4;QLIN_M1_PREFETCH=16;QLIN_M1_BLOCKS=4;QLIN_M1_BLOCKS=4,QLIN_M1_PREFETCH=16;QLIN_M1_WARPS=16,QLIN_M1_PREFETCH=16" > "$O/kbench.txt" 2>&1
grep -E "defines|(Q8_0|Q4_K).*(gate\+up|down|q/o) " "$O/kbench.txt" | tee -a "$L"
python3 - "$O/kbench.txt" <<'PY' | tee -a "$L"
import re, sys
cur = None; tot = {}
for line in open(sys.argv[1]):
    m = re.match(r"linear kernels, defines \{(.*)\}", line)
    if m: cur = m.group(1); tot[cur] = 0.0; continue
    f = line.split()
    if cur and len(f) > 6 and f[0] == "linear" and f[5] == "1" and f[4] in ("q/o", "gate+up", "down", "qkv"):
        tot[cur] += float(f[6])
for k, v in tot.items(): print(f"M=1 sum {v:8.2f} us  {{{k}}}")
best = min(tot, key=tot.get)
open("/tmp/best.toml", "w").write("[kernel_defines]\n" + "".join(f'{a.split("=")[0].strip()} = "{a.split("=")[1].strip()}"\n' for a in best.split(",")))
print("kept:", best)
PY
step "gates tiny (kept set)"; $B --config /tmp/best.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step "decode bs=1 depth 128 q8_0: defaults, kept set"
$B --backend cuda bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 --new-tokens 256 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
$B --backend cuda --config /tmp/best.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 --new-tokens 256 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step "tune spec QTC=1"
$B --backend cuda --config /tmp/tc.toml tune --what spec --gates none --model synth:llama-3.1-8b:q8_0 --reps 3 \
  --out "$O/h200-spec-qtc.toml" > "$O/tune-spec.txt" 2>&1; grep -E "verify|batch" "$O/tune-spec.txt" | tee -a "$L"
step done
