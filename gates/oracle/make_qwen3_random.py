#!/usr/bin/env python3
"""Write a small random-weight Qwen3 checkpoint in Hugging Face layout.

    python3 gates/oracle/make_qwen3_random.py --out DIR [--seed 0]

Depends only on numpy and the Python standard library (no torch, no
safetensors, no transformers), so CI can regenerate the checkpoint cheaply.
Output is byte-for-byte deterministic for a given seed; the sha256 of every
file is printed.

DIR receives:
  config.json                         Qwen3ForCausalLM, 4 layers, hidden 256, 8 q heads / 2 kv heads, head_dim 64
  generation_config.json
  tokenizer.json                      copy of fixtures/tiny_bpe_tokenizer.json (byte-level BPE, 1024 ids)
  tokenizer_config.json               ChatML chat_template, eos <|im_end|>, pad <|endoftext|>, no BOS
  model-00001-of-00002.safetensors    bf16; embed_tokens + layers 0..1
  model-00002-of-00002.safetensors    bf16; layers 2..3 + model.norm + lm_head
  model.safetensors.index.json        weight_map

Weights: numpy default_rng(seed), one draw per tensor in tensor_specs() order.
Projection matrices: standard_normal * 0.05. Token embedding: standard_normal
* 1.0; lm_head: standard_normal * 0.2 (see EMBED_SCALE / LM_HEAD_SCALE below).
RMSNorm weights (input/post-attention/final, q_norm, k_norm): 1 + 0.1 *
standard_normal. Values are drawn in float64, cast to float32, then
rounded to bfloat16 with round-to-nearest-even, so loading the bf16 files in
float32 reproduces the stored values exactly.
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER_FIXTURE = os.path.join(HERE, "fixtures", "tiny_bpe_tokenizer.json")

HIDDEN = 256
INTERMEDIATE = 768
LAYERS = 4
HEADS = 8
KV_HEADS = 2
HEAD_DIM = 64
MATRIX_SCALE = 0.05
# The embedding is drawn larger than the projections: at 0.05 the token
# embedding is ~20x smaller than each block's output, the current token barely
# influences the next-token distribution, and greedy decoding collapses into a
# single repeated token. At 1.0 generations vary with the prompt.
EMBED_SCALE = 1.0
# lm_head is drawn at 4x the projection scale: logits then have std ~3 instead
# of ~0.8, which leaves greedy choices unchanged but makes top-1/top-2 margins
# ~4x wider, so fewer steps are near-ties for a float32 parity check.
LM_HEAD_SCALE = 0.2
NORM_SCALE = 0.1

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest, ties to even."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError("non-finite weight")
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def tensor_specs():
    """(name, shape, kind) in a fixed order; kind is 'matrix', 'embed', 'lm_head' or 'norm'."""
    specs = [("model.embed_tokens.weight", None, "embed")]  # shape filled in with the vocab size
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (HIDDEN,), "norm"),
            (p + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN), "matrix"),
            (p + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "matrix"),
            (p + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "matrix"),
            (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM), "matrix"),
            (p + "self_attn.q_norm.weight", (HEAD_DIM,), "norm"),
            (p + "self_attn.k_norm.weight", (HEAD_DIM,), "norm"),
            (p + "post_attention_layernorm.weight", (HIDDEN,), "norm"),
            (p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN), "matrix"),
            (p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN), "matrix"),
            (p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE), "matrix"),
        ]
    specs += [("model.norm.weight", (HIDDEN,), "norm"), ("lm_head.weight", None, "lm_head")]
    return specs


def shard_of(name: str) -> int:
    """Shard 1: embeddings and the first half of the layers; shard 2: the rest."""
    if name.startswith("model.layers."):
        return 1 if int(name.split(".")[2]) < LAYERS // 2 else 2
    return 1 if name == "model.embed_tokens.weight" else 2


def make_weights(seed: int, vocab: int):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, kind in tensor_specs():
        if shape is None:
            shape = (vocab, HIDDEN)
        x = rng.standard_normal(shape)  # float64, stable PCG64/ziggurat stream
        if kind == "norm":
            x = 1.0 + NORM_SCALE * x
        elif kind == "embed":
            x = EMBED_SCALE * x
        elif kind == "lm_head":
            x = LM_HEAD_SCALE * x
        else:
            x = MATRIX_SCALE * x
        out[name] = (shape, f32_to_bf16_bits(x.astype(np.float32)))
    return out


def write_safetensors(path: str, tensors):
    """tensors: list of (name, shape, uint16 array). Writes BF16 safetensors, names sorted."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, shape, bits in sorted(tensors, key=lambda t: t[0]):
        raw = bits.astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # pad header to 8-byte alignment, as safetensors does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)
    return offset


def write_json(path: str, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    with open(TOKENIZER_FIXTURE, "rb") as f:
        tok_bytes = f.read()
    tok = json.loads(tok_bytes)
    ids = dict(tok["model"]["vocab"])
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    ids.update(added)
    vocab = max(ids.values()) + 1
    assert vocab == len(ids), "tokenizer ids are not dense"
    eot, im_start, im_end = added["<|endoftext|>"], added["<|im_start|>"], added["<|im_end|>"]

    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": eot,
        "eos_token_id": im_end,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": 4096,
        "max_window_layers": LAYERS,
        "model_type": "qwen3",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab,
    }
    generation_config = {
        "bos_token_id": eot,
        "eos_token_id": [im_end, eot],
        "pad_token_id": eot,
        "do_sample": False,
    }
    added_decoder = {
        str(t["id"]): {
            "content": t["content"],
            "lstrip": t["lstrip"],
            "normalized": t["normalized"],
            "rstrip": t["rstrip"],
            "single_word": t["single_word"],
            "special": t["special"],
        }
        for t in tok["added_tokens"]
    }
    tokenizer_config = {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }

    weights = make_weights(args.seed, vocab)
    shards = {1: [], 2: []}
    for name, (shape, bits) in weights.items():
        shards[shard_of(name)].append((name, shape, bits))
    files = {k: f"model-{k:05d}-of-00002.safetensors" for k in shards}
    total = 0
    for k, tensors in shards.items():
        total += write_safetensors(os.path.join(args.out, files[k]), tensors)
    index = {
        "metadata": {"total_size": total},
        "weight_map": {name: files[shard_of(name)] for name in sorted(weights)},
    }

    write_json(os.path.join(args.out, "config.json"), config)
    write_json(os.path.join(args.out, "generation_config.json"), generation_config)
    write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config)
    write_json(os.path.join(args.out, "model.safetensors.index.json"), index)
    with open(os.path.join(args.out, "tokenizer.json"), "wb") as f:
        f.write(tok_bytes)

    names = [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        files[1],
        files[2],
        "model.safetensors.index.json",
    ]
    for n in names:
        with open(os.path.join(args.out, n), "rb") as f:
            data = f.read()
        print(f"{hashlib.sha256(data).hexdigest()}  {n}  ({len(data)} bytes)")
    print(f"seed {args.seed}, vocab {vocab}, {sum(b.size for _, b in weights.values())} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
