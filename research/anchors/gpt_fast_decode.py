#!/usr/bin/env python3
"""The gpt-fast recipe as a decode-speed anchor for `memra bench decode --vs gpt-fast`.

The recipe (PyTorch's gpt-fast, 2023): a plain Llama forward in PyTorch, a static KV cache
preallocated for the whole sequence, and the one-token decode step compiled with
`torch.compile(mode="reduce-overhead", fullgraph=True)`, which captures it as a CUDA graph. This
file is our own small implementation of that recipe (written for memra, not taken from gpt-fast),
so the anchor does not depend on HF transformers' generate loop, whose compiled static-cache path
crashed inside torch inductor on our H200 (research/cuda-notes.md, runs 12-14).

Reads an HF Llama checkpoint directory (config.json plus safetensors, as `memra synth` writes
them). Decode tok/s is measured as memra measures it: a batch of B random prompts of D tokens is
prefilled (uncompiled), the first token chosen, then N - 1 greedy decode steps are timed, first
to last; tok/s = B (N - 1) / that time. RoPE uses rope_theta without Llama 3's frequency scaling
(`memra synth` writes `rope_scaling: null`), which changes values, not cost.

`--check` compares the implementation with HF transformers in float32 on both sides, before the
timed model is built in --dtype: in bf16 the two differ by rounding alone (fused against separate
projections), which 32 random-weight layers grow to a few per cent of the logits (run 34 on the
H200: 4.9e-2 relative, greedy tokens apart), so a bf16 comparison cannot tell a bug from noise.

Prints one JSON line: {"anchor", "unit": "tok/s", "n", "median", "min", "max", "samples", "torch",
"transformers": null, "device", "compiled"}.

Usage: gpt_fast_decode.py --model DIR [--batch B] [--depth D] [--new-tokens N] [--reps R]
                          [--warmup W] [--dtype bfloat16] [--no-compile]
"""
import argparse
import glob
import json
import os
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
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--check",
        action="store_true",
        help="first compare the prefill's last-position logits and 8 greedy tokens with HF "
        "transformers' Llama, both in float32 (needs transformers; exits 1 beyond 1e-4 relative)",
    )
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, a.dtype)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    d = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or d // nh
    n_layers = cfg["num_hidden_layers"]
    eps = cfg.get("rms_norm_eps", 1e-5)
    theta = cfg.get("rope_theta", 10000.0)
    w_host = {}
    for f in sorted(glob.glob(os.path.join(a.model, "*.safetensors"))):
        w_host.update(load_file(f))
    max_len = a.depth + a.new_tokens

    class Llama(torch.nn.Module):
        """Weights, RoPE tables and the static KV cache as buffers (so a compiled step may
        update the cache in place and still be captured as a CUDA graph)."""

        def __init__(self, dtype):
            super().__init__()
            self.dtype = dtype
            w = {k: v.to(dev, dtype) for k, v in w_host.items()}
            buf = self.register_buffer
            buf("embed", w["model.embed_tokens.weight"])
            buf("head", w.get("lm_head.weight", w["model.embed_tokens.weight"]))
            buf("norm", w["model.norm.weight"])
            for i in range(n_layers):
                p = f"model.layers.{i}."
                qkv = [w[p + f"self_attn.{x}_proj.weight"] for x in "qkv"]
                buf(f"wqkv{i}", torch.cat(qkv, dim=0).contiguous())
                buf(f"wo{i}", w[p + "self_attn.o_proj.weight"])
                gu = [w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]]
                buf(f"w13{i}", torch.cat(gu, dim=0).contiguous())
                buf(f"w2{i}", w[p + "mlp.down_proj.weight"])
                buf(f"n1{i}", w[p + "input_layernorm.weight"])
                buf(f"n2{i}", w[p + "post_attention_layernorm.weight"])
                buf(f"kc{i}", torch.zeros(a.batch, nkv, max_len, hd, device=dev, dtype=dtype))
                buf(f"vc{i}", torch.zeros(a.batch, nkv, max_len, hd, device=dev, dtype=dtype))
            inv = 1.0 / (theta ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
            ang = torch.outer(torch.arange(max_len, device=dev, dtype=torch.float32), inv)
            buf("cos", ang.cos().repeat(1, 2).to(dtype))  # [max_len, hd], rotate-half layout
            buf("sin", ang.sin().repeat(1, 2).to(dtype))
            buf("causal", torch.tril(torch.ones(max_len, max_len, device=dev, dtype=torch.bool)))

        def rms(self, x, g):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(self.dtype) * g

        def rope(self, x, pos):  # x [B, H, T, hd]
            c, s = self.cos[pos][None, None], self.sin[pos][None, None]
            x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
            return x * c + torch.cat([-x2, x1], dim=-1) * s

        def forward(self, ids, pos):  # ids [B, T], pos [T] -> logits of the last position
            b, t = ids.shape
            x = F.embedding(ids, self.embed)
            mask = self.causal[pos]  # [T, max_len]
            for i in range(n_layers):
                g = lambda n: getattr(self, f"{n}{i}")  # noqa: E731
                h = self.rms(x, g("n1"))
                q, k, v = F.linear(h, g("wqkv")).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
                q = self.rope(q.view(b, t, nh, hd).transpose(1, 2), pos)
                k = self.rope(k.view(b, t, nkv, hd).transpose(1, 2), pos)
                v = v.view(b, t, nkv, hd).transpose(1, 2)
                kc, vc = g("kc"), g("vc")
                kc[:, :, pos] = k
                vc[:, :, pos] = v
                o = F.scaled_dot_product_attention(
                    q, kc, vc, attn_mask=mask, enable_gqa=nh != nkv
                )
                x = x + F.linear(o.transpose(1, 2).reshape(b, t, nh * hd), g("wo"))
                gate, up = F.linear(self.rms(x, g("n2")), g("w13")).chunk(2, dim=-1)
                x = x + F.linear(F.silu(gate) * up, g("w2"))
            return F.linear(self.rms(x[:, -1], self.norm), self.head)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    g = torch.Generator().manual_seed(0)
    vocab = cfg["vocab_size"]
    prompts = torch.randint(0, vocab, (a.batch, a.depth), generator=g).to(dev)

    if a.check:
        from transformers import AutoModelForCausalLM

        f32 = torch.float32
        ref = AutoModelForCausalLM.from_pretrained(a.model, dtype=f32).to(dev).eval()
        forward = Llama(f32).eval().forward
        with torch.no_grad():
            want = ref(prompts).logits[:, -1].float()
            got = forward(prompts, torch.arange(a.depth, device=dev)).float()
            # Greedy decode through the static cache against HF's generate.
            n = min(8, a.new_tokens)
            hf = ref.generate(prompts, max_new_tokens=n, do_sample=False, min_new_tokens=n)
            toks = [got.argmax(-1, keepdim=True)]
            for i in range(n - 1):
                pos = torch.tensor([a.depth + i], device=dev)
                toks.append(forward(toks[-1], pos).argmax(-1, keepdim=True))
            same = torch.equal(torch.cat(toks, dim=1), hf[:, a.depth :])
        err = (got - want).abs().max().item() / want.abs().max().item()
        print(
            f"check vs transformers: max |dlogit| / max |logit| = {err:.3e}; "
            f"{n} greedy tokens {'equal' if same else 'DIFFER'}",
            file=sys.stderr,
        )
        del ref, forward
        if err > 1e-4 or not same:
            return 1

    model = Llama(dtype).eval()
    del w_host
    forward = model.forward
    step = forward
    if not a.no_compile:
        step = torch.compile(model, mode="reduce-overhead", fullgraph=True)

    def run():
        with torch.no_grad():
            tok = forward(prompts, torch.arange(a.depth, device=dev)).argmax(-1, keepdim=True)
            sync()
            t0 = time.perf_counter()
            for i in range(a.new_tokens - 1):
                pos = torch.tensor([a.depth + i], device=dev)
                if not a.no_compile and dev == "cuda":
                    torch.compiler.cudagraph_mark_step_begin()
                tok = step(tok, pos).argmax(-1, keepdim=True)
            sync()
            return a.batch * (a.new_tokens - 1) / (time.perf_counter() - t0)

    for _ in range(max(a.warmup, 1)):
        run()
    rates = [run() for _ in range(a.reps)]
    print(
        json.dumps(
            {
                "anchor": "gpt-fast",
                "unit": "tok/s",
                "n": len(rates),
                "median": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "samples": rates,
                "torch": torch.__version__,
                "transformers": None,
                "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
                "compiled": not a.no_compile,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
