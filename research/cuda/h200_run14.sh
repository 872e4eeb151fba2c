#!/bin/bash
# First device call of the fifth session: CUDA graphs for decode steps (captured on a created
# stream with cudarc's per-buffer events off, replayed with refilled inputs), attention on a fixed
# split grid into a kept workspace, the smem opt-in set once per function. Correctness first: the
# self-check (the fourth session's review fixes had not run here yet; the attention check now also
# compares the workspace path), the CUDA lane on qwen3-random (cuda-graphs/qwen3 crosses position
# 256) and the tiny models, the cuda-graphs canaries. Then bs=1 decode on the 8B shape, depth
# 128, 256 new tokens, N = 5, graphs off then on for each dtype; gpt-fast beside BF16.
# Usage: h200_run14.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "attn|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B gate --lane cuda --only cuda-graphs --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "run|GREEN|RED" "$O/canary.txt" | tail -4 | tee -a "$L"
for d in q8_0 bf16 q4_k; do
  for g in 0 32; do
    vs=""; [ "$d" = bf16 ] && [ "$g" = 32 ] && vs="--vs gpt-fast"
    step "decode bs=1 depth 128 $d graphs<=$g $vs"
    $B --backend cuda --cuda-graph-max-batch $g bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
      --new-tokens 256 --reps 5 $vs --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
  done
done
python3 -c "import json; [print(k, v.get('median'), v.get('ratio'), (v.get('error') or '')[:300]) for l in open('$O/bench.jsonl') for r in [json.loads(l)] for k,v in (r.get('anchor') or {}).items()]" | tee -a "$L"
step done
