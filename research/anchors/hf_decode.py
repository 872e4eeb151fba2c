#!/usr/bin/env python3
"""Decode-speed anchor for `memra bench decode --vs hf-eager|gpt-fast`.

Runs HF transformers on an HF checkpoint directory and prints one JSON line:
{"anchor", "unit": "tok/s", "n", "median", "min", "max", "samples", "torch", "transformers",
"device"}.

Decode tok/s is measured the way memra measures it: the time of a generation of N new tokens
minus the time of the same generation stopped after 1 token (prefill plus the first token), for
a batch of B random prompts of D tokens, greedy, end-of-sequence ignored.

--compile is the gpt-fast recipe as HF transformers exposes it: a static KV cache
(`cache_implementation="static"`) and `torch.compile(mode="reduce-overhead", fullgraph=True)` of
the forward (which captures CUDA graphs); without it, eager mode.

Usage: hf_decode.py --model DIR [--batch B] [--depth D] [--new-tokens N] [--reps R]
                    [--warmup W] [--compile] [--dtype bfloat16]
"""
import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--depth", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).to(dev)
    model.eval()
    if a.compile:
        model.generation_config.cache_implementation = "static"
        compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

        def forward(*args, **kwargs):
            # Each call is a new CUDA-graph step: the static cache is updated in place inside the
            # graph, and without this mark torch refuses to replay over the previous call's
            # outputs ("accessing tensor output of CUDAGraphs that has been overwritten").
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*args, **kwargs)

        model.forward = forward
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (a.batch, a.depth), generator=g).to(dev)
    mask = torch.ones_like(ids)

    def run(n: int) -> float:
        if dev == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        if dev == "cuda":
            torch.cuda.synchronize()
        assert out.shape[1] == a.depth + n, out.shape
        return time.perf_counter() - t

    samples = []
    for i in range(a.warmup + a.reps):
        full = run(a.new_tokens)
        first = run(1)
        if i >= a.warmup:
            samples.append((a.new_tokens - 1) * a.batch / max(full - first, 1e-9))
    print(
        json.dumps(
            {
                "anchor": "gpt-fast" if a.compile else "hf-eager",
                "unit": "tok/s",
                "n": len(samples),
                "median": statistics.median(samples),
                "min": min(samples),
                "max": max(samples),
                "samples": samples,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
