#!/usr/bin/env bash
# Speculative decoding on the CPU backend: acceptance and decode speed vs plain decode on the
# three prompt classes of gates/prompts/spec_*.jsonl. `memra run --spec` times the speculative
# run, then runs plain decode on the same request and checks the outputs are identical.
# Usage: research/spec/run_cpu_bench.sh [MODEL] [N]   (prints one line per run)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/memra}
MODEL=${1:-qwen2.5-coder-0.5b-instruct}
N=${2:-3}
for class in chat code agentic; do
  text=$(python3 -c "import json;print(json.loads(open('gates/prompts/spec_$class.jsonl').readline())['text'])")
  chat=$(python3 -c "import json;print('--chat' if json.loads(open('gates/prompts/spec_$class.jsonl').readline())['chat'] else '')")
  for spec in ngram layerskip:12; do
    for i in $(seq "$N"); do
      out=$("$BIN" run "$MODEL" $chat --prompt "$text" --temperature 0 --max-tokens 128 --ignore-eos \
        --spec "$spec" --k 4 2>&1 >/dev/null | grep -E "^(speculative|plain)" | tr '\n' ' ')
      echo "$class $spec run $i: $out"
    done
  done
done
