#!/usr/bin/env python3
"""Hugging Face transformers parity oracle: greedy-decode reference data for memra.

For each model, run a fixed set of prompts through transformers in float32 on
CPU (eager attention), greedily decode exactly STEPS new tokens (EOS does not
stop decoding) with a manual forward loop over the KV cache, and record for
every step the top-20 logits. Output: gates/oracle/hf_ref/<name>.json, plus the
transformers-derived config as <name>.config.json.

Models:
  smollm2-135m-instruct        GGUF (llama arch), dequantized to float32 by transformers
  gemma-3-270m                 GGUF (gemma3 arch, base model)
  qwen2.5-coder-0.5b-instruct  GGUF (qwen2 arch)
  qwen3-random                 bf16 safetensors from make_qwen3_random.py --seed 0, loaded in float32
  synth-tiny-{llama,qwen2,qwen3,gemma3}
                               bf16 safetensors written by `memra synth --shape tiny-X --dtype bf16
                               --format safetensors --seed 0` (pass each with --synth NAME=DIR;
                               the gates' `synth:tiny-X:bf16` holds the same values), loaded in
                               float32: HF reads memra's synthetic checkpoints and agrees with them

Usage:
  python3 gates/oracle/make_hf_ref.py [--models-dir /tmp/models] [--qwen3-dir DIR]
                                      [--only NAME ...] [--out gates/oracle/hf_ref]
                                      [--synth synth-tiny-llama=DIR ...]
If --qwen3-dir is not given (or has no config.json) the checkpoint is generated
into a temporary directory with make_qwen3_random.py --seed 0.

Requires: torch, transformers, gguf, numpy (and accelerate for GGUF loading).

Output schema (compact JSON, one object per file):
{
  "model": name, "source": gguf file name or "make_qwen3_random.py --seed 0",
  "source_sha256": {file: sha256},           # the GGUF, or the generated checkpoint files
  "transformers": version, "torch": version, "dtype": "float32", "steps": 64,
  "add_bos": bool, "bos_id": int|null,       # what was prepended to prompt_ids
  "prompts": [{
      "kind": short label, "text": prompt text (after chat templating, if any),
      "chat": bool, "messages": [...]  (only when chat: the messages before templating),
      "prompt_ids": [...], "generated_ids": [64 ids],
      "steps": [{"top_ids": [20 ids, logit descending], "top_logits": [20 floats], "margin": top1-top2}, ... 64],
      "nocache_max_abs_diff": max |logit| difference, over the full vocabulary and all 64 steps,
                              between the cached decode and one uncached forward of prompt+generated[:-1]
  }, ...],
  "near_ties": [{"prompt": index, "step": index, "margin": m}, ...]   # margin < 1e-3
}
Step i holds the logits that chose generated_ids[i]; step 0 is the last prompt position.
"""
import argparse
import hashlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 64
TOPK = 20
NEAR_TIE = 1e-3

GGUF_MODELS = {
    "smollm2-135m-instruct": {"file": "smollm2-135m-instruct.gguf", "instruct": True},
    "gemma-3-270m": {"file": "gemma-3-270m.gguf", "instruct": False},
    "qwen2.5-coder-0.5b-instruct": {"file": "qwen2.5-coder-0.5b-instruct.gguf", "instruct": True},
}
ALL_MODELS = list(GGUF_MODELS) + ["qwen3-random"]

# ---------------------------------------------------------------------------
# Prompts (written for this oracle).

LONG_A = (
    "The water cycle describes how water moves between the oceans, the air and the land. Heat from the sun "
    "warms the surface of the sea, and some of the water evaporates into the atmosphere as invisible vapour. "
    "As the warm, moist air rises, it cools, and the vapour condenses into tiny droplets that form clouds. "
    "When the droplets grow heavy enough, they fall back to the ground as rain, snow or hail. Some of that "
    "water soaks into the soil and slowly feeds underground aquifers, while the rest runs off into streams "
    "and rivers that eventually return it to the sea. Plants also play a part: their roots draw water from "
    "the soil, and their leaves release it into the air through a process called transpiration. Over "
    "thousands of years, the same water may travel around this cycle many times, spending days in the air, "
    "weeks in a river, or centuries frozen in a glacier before it moves on again. In summary, the water cycle"
)

LONG_B = (
    "Maria had worked at the lighthouse for eleven years when the letter arrived. It was written on thick, "
    "cream-coloured paper, and the handwriting was careful and old-fashioned, as if the writer had practised "
    "each letter before committing it to the page. The letter said that the lighthouse would be automated in "
    "the spring, and that her services would no longer be required. She read it twice at the kitchen table, "
    "then folded it and put it in the drawer with the tide tables and the spare batteries. That evening she "
    "climbed the spiral stairs as she always did, one hundred and twelve steps, and checked the lamp, the "
    "lens and the small brass clock that had kept time for the keepers before her. Outside, the sea was calm "
    "and grey, and a fishing boat was making its way slowly back towards the harbour.\n\n"
    "In the weeks that followed, she began to write down everything she knew about the place. She wrote about "
    "the way the fog rolled in from the north-east on autumn mornings, and about the gulls that nested on the "
    "eastern ledge every April. She described the sound the wind made in the railings during a storm, a low "
    "and steady note that rose to a whistle when the gusts were strongest. She listed the ships that had "
    "passed, the names she remembered, and the night a small yacht had lost its mast and drifted towards the "
    "rocks until the coastguard reached it. She did not know who would read these pages, or whether anyone "
    "would read them at all, but writing them made the leaving feel less like an ending.\n\n"
    "Her sister called from the city every Sunday. She said there was a spare room in her flat, close to the "
    "park and the library, and that Maria could stay as long as she liked. Maria thanked her and said she "
    "would think about it. After each call she walked down to the rocks below the tower and watched the "
    "water for a while, counting the waves as her father had taught her, until the light began to fade.\n\n"
    "When spring came, two engineers arrived with crates of equipment: sensors, cables, a grey metal cabinet "
    "and a solar panel that they bolted to the roof of the old storeroom. They were polite and efficient, "
    "and they asked her many questions about the lamp and the generator. On their last day, one of them "
    "noticed the notebook on the kitchen table and asked what it was. Maria hesitated, and then"
)

LONG_C = (
    "\n\nA computer program is a list of instructions that a machine can follow. The earliest programs were "
    "entered by setting switches or punching holes in cards, and a single mistake could mean starting again "
    "from the beginning. Over time, programmers invented languages that were easier for people to read and "
    "write, and compilers that translated those languages into the instructions a processor understands. "
    "Today a typical program is built from many small functions, each of which does one job well: reading a "
    "file, parsing a number, sorting a list, or drawing a button on the screen. Good programs are tested "
    "carefully, because even a small error in one function can cause surprising behaviour somewhere else. "
    "Programmers write automated tests that call each function with known inputs and check that the outputs "
    "are correct, and they run these tests every time they change the code. When a test fails, the first "
    "step is to find the smallest input that reproduces the problem, and the second is to understand why"
)

CHAT_QUESTION = "What is the capital of France?"
CHAT_CODE = "Write a Python function that checks whether a number is prime."


def base_prompts():
    """(kind, text) pairs shared by every model, before any model-specific additions."""
    return [
        ("factual-completion", "The capital of France is"),
        ("factual-question", "Question: At what temperature does water boil at sea level, in degrees Celsius?\nAnswer:"),
        ("code", 'def quicksort(arr):\n    """Sort a list of integers in ascending order."""\n'),
        ("list", "Here is a list of the planets in our solar system, in order from the Sun:\n1."),
        ("story", "Once upon a time, in a small village at the foot of a mountain, there lived"),
        ("non-english-fr", "La Tour Eiffel a été construite pour l'Exposition universelle de 1889. Elle se trouve"),
        ("non-english-zh", "北京是中国的首都。上海是"),
        ("long-200", LONG_A),
        ("short", "The"),
        ("long-sliding-window", LONG_B),
        ("long-over-window", LONG_B + LONG_C),
    ]


# ---------------------------------------------------------------------------


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_meta(path):
    from gguf import GGUFReader

    r = GGUFReader(path)

    def get(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    meta = {
        "add_bos": bool(get("tokenizer.ggml.add_bos_token", False)),
        "bos_id": get("tokenizer.ggml.bos_token_id"),
        "eos_id": get("tokenizer.ggml.eos_token_id"),
        "chat_template": get("tokenizer.chat_template"),
        "arch": get("general.architecture"),
    }
    norms = {}
    for t in r.tensors:
        if t.name.startswith("blk.0.") and t.name.endswith("norm.weight") or t.name == "output_norm.weight":
            norms[t.name] = np.array(t.data, dtype=np.float32).reshape(-1)
    return meta, norms


def model_prompts(name, tok, instruct, chat_template):
    prompts = [{"kind": k, "text": t, "chat": False} for k, t in base_prompts()]
    if chat_template is not None:
        for kind, q in (("chat-question", CHAT_QUESTION), ("chat-code", CHAT_CODE)):
            msgs = [{"role": "user", "content": q}]
            text = tok.apply_chat_template(msgs, chat_template=chat_template, tokenize=False, add_generation_prompt=True)
            prompts.append({"kind": kind, "text": text, "chat": True, "messages": msgs})
    elif name == "gemma-3-270m":
        # Base model and the GGUF has no chat template: use Gemma's turn markup written out by hand,
        # which also exercises special-token matching inside prompt text.
        for kind, q in (("turn-markup-question", CHAT_QUESTION), ("turn-markup-code", CHAT_CODE)):
            text = f"<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"
            prompts.append({"kind": kind, "text": text, "chat": False})
    return prompts


def tokenize(tok, text, add_bos, bos_id):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if add_bos:
        ids = [bos_id] + ids
    default = tok(text)["input_ids"]
    if default != ids:
        print(f"  note: tokenizer default special-token handling differs from GGUF add_bos for {text[:30]!r}: "
              f"{default[:4]} vs {ids[:4]}", flush=True)
    return ids


@torch.inference_mode()
def run_prompt(model, ids):
    # transformers 5.x renamed the forward argument past_key_values -> cache.
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    inp = torch.tensor([ids], dtype=torch.long)
    out = model(input_ids=inp, use_cache=True, logits_to_keep=1)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    steps, generated, all_logits = [], [], []
    for i in range(STEPS):
        logits = out.logits[0, -1].to(torch.float32)
        all_logits.append(logits.clone())
        vals, idx = torch.topk(logits, TOPK, sorted=True)
        nxt = int(idx[0])
        assert float(logits[nxt]) == float(logits.max())
        v = [float(x) for x in vals]
        steps.append({"top_ids": [int(x) for x in idx], "top_logits": v, "margin": v[0] - v[1]})
        generated.append(nxt)
        if i + 1 == STEPS:
            break
        kw = {cache_kw: cache}
        out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long), use_cache=True, **kw)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    # Consistency check: one uncached forward over prompt + generated[:-1] must give the same logits.
    full = torch.tensor([ids + generated[:-1]], dtype=torch.long)
    ref = model(input_ids=full, use_cache=False, logits_to_keep=STEPS).logits[0].to(torch.float32)
    diff = float((ref - torch.stack(all_logits)).abs().max())
    agree = bool((ref.argmax(-1) == torch.tensor(generated)).all())
    return generated, steps, diff, agree


def load_gguf(models_dir, spec):
    path = os.path.join(models_dir, spec["file"])
    tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=spec["file"])
    model = AutoModelForCausalLM.from_pretrained(
        models_dir, gguf_file=spec["file"], dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return path, tok, model


def load_hf_dir(d):
    """An HF safetensors checkpoint directory in float32 (eager attention): tokenizer, model, the
    sha256 of its .json and .safetensors files, and its chat template (None without one)."""
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    sha = {f: sha256_file(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith((".json", ".safetensors"))}
    with open(os.path.join(d, "tokenizer_config.json")) as f:
        chat_template = json.load(f).get("chat_template")
    return tok, model, sha, chat_template


def check_gemma_norms(model, gguf_norms):
    """Does transformers subtract 1 from GGUF Gemma norm weights (HF Gemma computes x * (1 + w))?"""
    hf = {
        "output_norm.weight": model.model.norm.weight,
        "blk.0.attn_norm.weight": model.model.layers[0].input_layernorm.weight,
        "blk.0.post_attention_norm.weight": model.model.layers[0].post_attention_layernorm.weight,
        "blk.0.ffn_norm.weight": model.model.layers[0].pre_feedforward_layernorm.weight,
        "blk.0.post_ffw_norm.weight": model.model.layers[0].post_feedforward_layernorm.weight,
        "blk.0.attn_q_norm.weight": model.model.layers[0].self_attn.q_norm.weight,
        "blk.0.attn_k_norm.weight": model.model.layers[0].self_attn.k_norm.weight,
    }
    lines = []
    for k, p in hf.items():
        g = torch.from_numpy(gguf_norms[k])
        w = p.detach().to(torch.float32)
        lines.append(
            f"    {k}: gguf mean {float(g.mean()):.4f}, hf mean {float(w.mean()):.4f}, "
            f"max|gguf-1-hf| {float((g - 1 - w).abs().max()):.3g}, max|gguf-hf| {float((g - w).abs().max()):.3g}"
        )
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default="/tmp/models")
    ap.add_argument("--qwen3-dir", default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "hf_ref"))
    ap.add_argument("--only", nargs="*", choices=ALL_MODELS)
    ap.add_argument("--synth", nargs="*", default=[], metavar="NAME=DIR",
                    help="also (or, with --only, instead) memra synth checkpoints: NAME=DIR each")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    synth = dict(x.split("=", 1) for x in args.synth)
    names = (args.only or ([] if synth else ALL_MODELS)) + list(synth)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, threads {torch.get_num_threads()}")

    for name in names:
        t0 = time.time()
        print(f"== {name}", flush=True)
        tmp = None
        if name in GGUF_MODELS:
            spec = GGUF_MODELS[name]
            path, tok, model = load_gguf(args.models_dir, spec)
            meta, norms = gguf_meta(path)
            source = spec["file"]
            source_sha = {spec["file"]: sha256_file(path)}
            add_bos, bos_id, chat_template = meta["add_bos"], meta["bos_id"], meta["chat_template"]
            instruct = spec["instruct"]
            if meta["arch"] == "gemma3":
                print("  gemma norm check:\n" + "\n".join(check_gemma_norms(model, norms)))
        elif name in synth:
            tok, model, source_sha, chat_template = load_hf_dir(synth[name])
            shape = name.removeprefix("synth-")
            source = f"memra synth --shape {shape} --dtype bf16 --format safetensors --seed 0"
            add_bos, bos_id = False, None
            instruct = chat_template is not None
        else:
            qdir = args.qwen3_dir
            if not qdir or not os.path.exists(os.path.join(qdir, "config.json")):
                tmp = tempfile.TemporaryDirectory()
                qdir = qdir or tmp.name
                subprocess.run(
                    [sys.executable, os.path.join(HERE, "make_qwen3_random.py"), "--out", qdir, "--seed", "0"],
                    check=True,
                )
            tok, model, source_sha, chat_template = load_hf_dir(qdir)
            source = "gates/oracle/make_qwen3_random.py --seed 0"
            add_bos, bos_id = False, None
            instruct = True
        assert model.dtype == torch.float32
        print(f"  loaded in {time.time() - t0:.1f}s; add_bos={add_bos} bos_id={bos_id} "
              f"attn={model.config._attn_implementation}", flush=True)

        cfg = model.config.to_dict()
        cfg["_name_or_path"] = name  # the load path is machine-specific; keep the file reproducible
        with open(os.path.join(args.out, f"{name}.config.json"), "w") as f:
            json.dump(cfg, f, indent=1, sort_keys=True, default=str)
            f.write("\n")

        records, near = [], []
        for pi, p in enumerate(model_prompts(name, tok, instruct, chat_template)):
            t1 = time.time()
            ids = tokenize(tok, p["text"], add_bos, bos_id)
            gen, steps, diff, agree = run_prompt(model, ids)
            rec = {"kind": p["kind"], "text": p["text"], "chat": p["chat"]}
            if "messages" in p:
                rec["messages"] = p["messages"]
            rec.update({"prompt_ids": ids, "generated_ids": gen, "steps": steps, "nocache_max_abs_diff": diff})
            records.append(rec)
            for si, s in enumerate(steps):
                if s["margin"] < NEAR_TIE:
                    near.append({"prompt": pi, "step": si, "margin": s["margin"]})
            mins = min(s["margin"] for s in steps)
            print(f"  [{pi:2d}] {p['kind']:22s} {len(ids):4d} prompt toks, {time.time() - t1:5.1f}s, "
                  f"min margin {mins:.3g}, nocache diff {diff:.2e}{'' if agree else ' ARGMAX-MISMATCH'} | "
                  f"{tok.decode(gen)[:70]!r}", flush=True)
        doc = {
            "model": name,
            "source": source,
            "source_sha256": source_sha,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "dtype": "float32",
            "steps": STEPS,
            "add_bos": add_bos,
            "bos_id": bos_id,
            "prompts": records,
            "near_ties": near,
        }
        out_path = os.path.join(args.out, f"{name}.json")
        with open(out_path, "w") as f:
            json.dump(doc, f, separators=(",", ":"), ensure_ascii=False)
        print(f"  wrote {out_path} ({os.path.getsize(out_path)} bytes), near-ties: {near}, "
              f"total {time.time() - t0:.1f}s", flush=True)
        del model
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
