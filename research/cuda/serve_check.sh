#!/bin/bash
# GPU machine: the same requests through `memra serve --backend cpu` and `--backend cuda`, streamed
# with curl; prints both texts and whether the bytes are identical.
# Usage: research/cuda/serve_check.sh MEMRA_BINARY OUT_DIR [MODEL [SAMPLING_JSON_FIELDS]]
# (defaults: smollm2-135m-instruct, '"temperature":0'; e.g. '"temperature":0.8,"top_p":0.9,"seed":7')
set -u
B=$1; O=$2; M=${3:-smollm2-135m-instruct}; S=${4:-'"temperature":0'}
start() { # backend port
  $B --backend "$1" serve --model "$M" --port "$2" > "$O/serve-$1.log" 2>&1 < /dev/null &
  PIDS="$PIDS $!"
  for _ in $(seq 1 120); do curl -sf "localhost:$2/readyz" >/dev/null && return 0; sleep 0.5; done
  echo "server $1 did not start"; cat "$O/serve-$1.log"; return 1
}
PIDS=""; T=$(mktemp -d)
trap 'kill $PIDS 2>/dev/null' EXIT
start cpu 8101 && start cuda 8102 || exit 1
i=0; same=0; total=0
while read -r prompt; do
  i=$((i+1)); total=$((total+1))
  body=$(printf '{"model":"%s","messages":[{"role":"user","content":%s}],"max_tokens":96,%s,"stream":true}' "$M" "$prompt" "$S")
  for p in 8101 8102; do
    curl -sN "localhost:$p/v1/chat/completions" -H 'content-type: application/json' -d "$body" \
      | sed -n 's/^data: //p' | grep -v '^\[DONE\]' \
      | python3 -c 'import sys,json; print("".join((json.loads(l)["choices"][0]["delta"].get("content") or "") for l in sys.stdin if json.loads(l)["choices"]), end="")' > "$T/text-$p-$i.txt"
  done
  if cmp -s "$T/text-8101-$i.txt" "$T/text-8102-$i.txt"; then same=$((same+1)); r=identical; else r=DIFFERENT; fi
  printf 'prompt %d: %s (%d bytes) %s\n' "$i" "$r" "$(wc -c < "$T/text-8102-$i.txt")" "$(head -c 70 "$T/text-8102-$i.txt" | tr '\n' ' ')"
done <<'P'
"What is the capital of France?"
"Write a haiku about the sea."
"Explain what a KV cache is in one paragraph."
"List three prime numbers and explain why they are prime."
P
echo "serve cpu vs cuda, $M, {$S}, streamed: $same of $total identical"
