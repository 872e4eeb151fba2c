#!/usr/bin/env python3
"""Checks `memra serve` with the official `openai` Python package.

Run by harness/tests/serve.rs against a live server:
    python3 openai_client.py --base-url http://127.0.0.1:PORT/v1 --model NAME
Exits non-zero (with the failing check) when anything is off.
"""

import argparse
import sys

import openai


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key", default="unused")
    a = ap.parse_args()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.api_key, max_retries=0, timeout=300)
    model = a.model
    msgs = [{"role": "user", "content": "What is the capital of France?"}]

    models = client.models.list()
    check([m.id for m in models.data] == [model], f"models: {models}")
    check(models.data[0].owned_by == "memra", "owned_by")

    # Chat, greedy.
    r = client.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=30)
    check("Paris" in r.choices[0].message.content, f"greedy answer: {r.choices[0].message.content!r}")
    check(r.choices[0].finish_reason == "stop", f"finish_reason {r.choices[0].finish_reason}")
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage")
    check(r.usage.prompt_tokens_details.cached_tokens is not None, "cached_tokens")

    # Seeded sampling: reproducible, and the stream concatenates to the same text.
    kw = dict(model=model, messages=msgs, temperature=0.8, seed=7, max_tokens=30)
    r1 = client.chat.completions.create(**kw)
    r2 = client.chat.completions.create(**kw)
    check(r1.choices[0].message.content == r2.choices[0].message.content, "seed reproducibility")
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    check(chunks[0].choices[0].delta.role == "assistant", "first delta has the role")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(text == r1.choices[0].message.content, f"stream {text!r} != {r1.choices[0].message.content!r}")
    check(chunks[-1].choices == [] and chunks[-1].usage is not None, "include_usage chunk")
    check(chunks[-1].usage.completion_tokens == r1.usage.completion_tokens, "stream usage")

    # n > 1.
    r = client.chat.completions.create(model=model, messages=msgs, n=3, temperature=1.0, seed=1, max_tokens=5)
    check(sorted(c.index for c in r.choices) == [0, 1, 2], "n=3 choices")

    # Logprobs.
    r = client.chat.completions.create(
        model=model, messages=msgs, temperature=0, max_tokens=4, logprobs=True, top_logprobs=2
    )
    lp = r.choices[0].logprobs.content
    check(len(lp) == r.usage.completion_tokens, "one logprob entry per token")
    check(all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in lp), "logprob values")

    # Stop.
    r = client.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=30, stop=["Paris"])
    check("Paris" not in r.choices[0].message.content, "stop string removed")
    check(r.choices[0].finish_reason == "stop", "stop finish_reason")

    # Completions, plain and streamed.
    kw = dict(model=model, prompt="The quick brown fox", max_tokens=12, temperature=0.7, seed=11)
    c1 = client.completions.create(**kw)
    s = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices)
    check(s == c1.choices[0].text, f"completions stream {s!r} != {c1.choices[0].text!r}")
    c = client.completions.create(model=model, prompt=["a", "b"], n=2, max_tokens=3, logprobs=1, temperature=0)
    check(sorted(x.index for x in c.choices) == [0, 1, 2, 3], "prompt list x n")
    check(all(len(x.logprobs.tokens) == len(x.logprobs.token_logprobs) for x in c.choices), "completion logprobs")

    # Errors surface as the SDK's exception types.
    try:
        client.chat.completions.create(model=model, messages=msgs, extra_body={"frobnicate": 1})
        check(False, "unknown parameter accepted")
    except openai.BadRequestError as e:
        check("frobnicate" in str(e), f"error names the parameter: {e}")
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs)
        check(False, "unknown model accepted")
    except openai.NotFoundError:
        pass

    print("all openai client checks passed")


if __name__ == "__main__":
    main()
