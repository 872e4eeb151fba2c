#!/bin/bash
# Third device call of the sixth session: the tensor-core kernels double-buffered (the next
# group's weight loads issued before the current group's MMAs) and every unit an independent MMA
# chain (BF16 too). Self-check with QTC=1; the linear kernels (BF16, Q8_0) at M = 1, 8, 32 for
# QTC=0 and QTC=1 with QTC_UNROLL 4/2/1 (and XSPLIT=2); the QTC=1 set with the least M = 1 time
# over the 8B shapes is kept for the rest: the CUDA lane (qwen3-random, tiny models) and
# cuda-graphs canaries, then on the 8B shape bs=32 decode (BF16, Q8_0), a 1,024-token BF16
# prefill, and bs=1 decode (BF16, Q8_0).
# Usage: h200_run21.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
step "self-check QTC=1"; $B --config /tmp/tc.toml probe --self-check > "$O/selfcheck-tc.txt" 2>&1
grep -E "linear_(bf16|q8_0)|self-check|FAIL|rror" "$O/selfcheck-tc.txt" | tee -a "$L"
step kbench; $B probe --bench-kernels --kernel-tokens 1,8,32 --kernel-dtypes bf16,q8_0 \
  --variants "QTC=0;QTC=1;QTC=1,QTC_UNROLL=2;QTC=1,QTC_UNROLL=1;QTC=1,QTC_UNROLL=2,QTC_XSPLIT=2" > "$O/kbench.txt" 2>&1
grep -E "defines|(BF16|Q8_0).*(gate\+up|down|q/o) " "$O/kbench.txt" | tee -a "$L"
python3 - "$O/kbench.txt" <<'PY' | tee -a "$L"
import re, sys
best = None; cur = None; tot = {}
for line in open(sys.argv[1]):
    m = re.match(r"linear kernels, defines \{(.*)\}", line)
    if m: cur = m.group(1); tot[cur] = 0.0; continue
    f = line.split()
    if cur and len(f) > 6 and f[0] == "linear" and f[5] == "1" and f[4] in ("q/o", "gate+up", "down", "qkv"):
        tot[cur] += float(f[6])
for k, v in tot.items(): print(f"M=1 sum {v:8.2f} us  {{{k}}}")
tc = {k: v for k, v in tot.items() if "QTC=1" in k and "XSPLIT" not in k}
best = min(tc, key=tc.get)
open("/tmp/tc.toml", "w").write("[kernel_defines]\n" + "".join(f'{a.split("=")[0].strip()} = "{a.split("=")[1].strip()}"\n' for a in best.split(",")))
print("kept:", best)
PY
cat /tmp/tc.toml | tee -a "$L"
step "gates"; $B --config /tmp/tc.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/tc.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B --config /tmp/tc.toml gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run" "$O/canary.txt" | tee -a "$L"
for d in bf16 q8_0; do
  step "decode bs=32 depth 128 $d"
  $B --backend cuda --config /tmp/tc.toml bench decode --model synth:llama-3.1-8b:$d --batch 32 --depth 128 \
    --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "ttft 1024 bf16"
$B --backend cuda --config /tmp/tc.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
for d in bf16 q8_0; do
  step "decode bs=1 depth 128 $d"
  $B --backend cuda --config /tmp/tc.toml bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
    --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
