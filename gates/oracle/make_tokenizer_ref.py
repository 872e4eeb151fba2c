#!/usr/bin/env python3
"""Expected token ids for gates/prompts/tokenizer_corpus.jsonl, one file per catalog model.

Writes gates/oracle/tokenizer_ids/<catalog-name>.jsonl: one line per corpus line, same order,
{"text": ..., "ids": [...]} (+ "ids_no_nfc" for Qwen2 on the few lines where NFC matters).
Ids are for encoding WITHOUT adding BOS/EOS; special / added tokens written literally in the text
are recognized as their single id (HF `tokenizers` added-token semantics: leftmost-longest match on
the raw text, before normalization).

Reference routes (all independent of memra's Rust code):
  gpt2 BPE (smollm2, qwen2.5):
    primary  : transformers' GGUF integration (AutoTokenizer.from_pretrained(dir, gguf_file=...)),
               its backend `tokenizers.Tokenizer`, with two documented fixes (see README.md):
                 smollm -> pre_tokenizer Sequence[Digits(individual_digits), ByteLevel(use_regex)]
                 qwen2  -> normalizer NFC (as transformers' own Qwen2Tokenizer and the model's tokenizer.json)
    cross    : a `tokenizers.Tokenizer` assembled here directly from the GGUF metadata. Must agree 100%.
  llama / SentencePiece (gemma3):
    primary  : split the raw text on CONTROL + USER_DEFINED tokens (leftmost-longest), encode each
               remaining fragment with the `sentencepiece` library using a BPE ModelProto built from
               tokenizer.ggml.tokens/scores/token_type (identity normalizer, no dummy prefix,
               whitespace escaped to U+2581, byte_fallback).
    cross 1  : pure-Python BPE-by-scores (SentencePiece BPE algorithm) on the same fragments.
    cross 2  : transformers' GGUF integration (GemmaTokenizer, merges derived from vocab order);
               disagreements are reported, not fatal (see README.md).

Usage: python3 gates/oracle/make_tokenizer_ref.py [--models-dir /tmp/models] [--corpus ...] [--out-dir ...]
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
from pathlib import Path

import numpy as np
import gguf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOG = ["smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct"]

# llama.cpp / sentencepiece token types
T_NORMAL, T_UNKNOWN, T_CONTROL, T_USER_DEFINED, T_UNUSED, T_BYTE = 1, 2, 3, 4, 5, 6


def dump_line(obj) -> str:
    s = json.dumps(obj, ensure_ascii=False)
    for ch in ("\u0085", "\u2028", "\u2029"):
        s = s.replace(ch, "\\u%04x" % ord(ch))
    return s


def read_meta(path: Path) -> dict:
    r = gguf.GGUFReader(str(path))
    f = r.fields
    meta = {
        "model": f["tokenizer.ggml.model"].contents(),
        "pre": f["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in f else None,
        "tokens": f["tokenizer.ggml.tokens"].contents(),
        "token_type": [int(x) for x in f["tokenizer.ggml.token_type"].contents()],
    }
    if "tokenizer.ggml.merges" in f:
        meta["merges"] = f["tokenizer.ggml.merges"].contents()
    if "tokenizer.ggml.scores" in f:
        meta["scores"] = [float(x) for x in np.asarray(f["tokenizer.ggml.scores"].contents(), dtype=np.float32)]
    for k in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        key = f"tokenizer.ggml.{k}"
        if key in f:
            meta[k] = int(f[key].contents())
    return meta


# ============================================================================ gpt2 / byte-level BPE

SMOLLM_DIGITS_FIX = True


def hf_route(models_dir: Path, name: str, pre: str):
    """transformers GGUF integration -> tokenizers.Tokenizer (+ documented fixes)."""
    from transformers import AutoTokenizer
    from tokenizers import normalizers, pre_tokenizers

    tok = AutoTokenizer.from_pretrained(str(models_dir), gguf_file=f"{name}.gguf")
    bt = tok.backend_tokenizer
    fixes = []
    if pre == "smollm":
        # transformers has no split regex for pre=smollm and falls back to plain GPT-2 ByteLevel.
        # SmolLM2's tokenizer.json (and llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: "\p{N}" then the GPT-2
        # regex) split every digit on its own first.
        bt.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        fixes.append("pre_tokenizer=Sequence[Digits(individual_digits=True),ByteLevel(add_prefix_space=False,use_regex=True)]")
    if pre == "qwen2":
        nfc_off = Tokenizer_from(bt)  # keep a copy without NFC for the ids_no_nfc annotation
        bt.normalizer = normalizers.NFC()
        fixes.append("normalizer=NFC")
        return bt, nfc_off, fixes
    return bt, None, fixes


def Tokenizer_from(bt):
    from tokenizers import Tokenizer
    return Tokenizer.from_str(bt.to_str())


GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def direct_route(meta: dict):
    """tokenizers.Tokenizer assembled here straight from GGUF metadata (cross-check)."""
    from tokenizers import Tokenizer, AddedToken, Regex, models, normalizers, pre_tokenizers, decoders

    vocab = {t: i for i, t in enumerate(meta["tokens"])}
    merges = [tuple(m.split(" ")) for m in meta["merges"]]
    assert all(len(m) == 2 for m in merges)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    pre = meta["pre"]
    if pre == "smollm":
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.Split(Regex(GPT2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    elif pre == "qwen2":
        tk.normalizer = normalizers.NFC()
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        raise ValueError(f"unhandled pre {pre}")
    tk.decoder = decoders.ByteLevel()
    tt = meta["token_type"]
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(meta["tokens"], tt) if ty == T_CONTROL]
    users = [AddedToken(t, special=False, normalized=False) for t, ty in zip(meta["tokens"], tt) if ty == T_USER_DEFINED]
    tk.add_special_tokens(specials)
    if users:
        tk.add_tokens(users)
    # added tokens must keep their GGUF ids
    for t, ty in zip(meta["tokens"], tt):
        if ty in (T_CONTROL, T_USER_DEFINED):
            assert tk.token_to_id(t) == vocab[t], t
    return tk


def encode_bt(bt, text: str) -> list[int]:
    return list(bt.encode(text, add_special_tokens=False).ids)


# ============================================================================ SentencePiece (gemma)

def split_specials(text: str, specials: list[str]) -> list[tuple[bool, str]]:
    """Leftmost-longest partition of raw text on literal special strings (HF added-token semantics).
    Returns [(is_special, piece)], dropping empty pieces."""
    by_first: dict[str, list[str]] = {}
    for s in specials:
        by_first.setdefault(s[0], []).append(s)
    for v in by_first.values():
        v.sort(key=len, reverse=True)
    out: list[tuple[bool, str]] = []
    buf_start = 0
    i = 0
    n = len(text)
    while i < n:
        cands = by_first.get(text[i])
        hit = None
        if cands:
            for s in cands:
                if text.startswith(s, i):
                    hit = s
                    break
        if hit is None:
            i += 1
            continue
        if buf_start < i:
            out.append((False, text[buf_start:i]))
        out.append((True, hit))
        i += len(hit)
        buf_start = i
    if buf_start < n:
        out.append((False, text[buf_start:]))
    return out


def build_spm(meta: dict):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    P = pb.ModelProto.SentencePiece
    m = pb.ModelProto()
    unk = meta["unknown_token_id"]
    for i, (tok, sc, ty) in enumerate(zip(meta["tokens"], meta["scores"], meta["token_type"])):
        p = m.pieces.add()
        # User-defined whitespace pieces are stored with real spaces; like HF tokenizers (added
        # tokens, normalized=False) and llama.cpp, they match only raw text, which gemma_encode()
        # splits off before this model sees a fragment. A literal "\u2581\u2581" in the input is
        # therefore two "\u2581" tokens, not the two-space token.
        p.piece = tok
        p.score = sc
        if i == unk:
            p.type = P.UNKNOWN
        elif ty == T_NORMAL:
            p.type = P.NORMAL
        elif ty == T_CONTROL:
            p.type = P.CONTROL
        elif ty == T_USER_DEFINED:
            p.type = P.USER_DEFINED
        elif ty == T_BYTE:
            p.type = P.BYTE
        elif ty == T_UNUSED:
            p.type = P.UNUSED
        else:
            p.type = P.NORMAL
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.vocab_size = len(meta["tokens"])
    ts.byte_fallback = True
    ts.unk_id = unk
    ts.bos_id = meta["bos_token_id"]
    ts.eos_id = meta["eos_token_id"]
    ts.pad_id = meta["padding_token_id"]
    ts.unk_piece = meta["tokens"][unk]
    ts.bos_piece = meta["tokens"][meta["bos_token_id"]]
    ts.eos_piece = meta["tokens"][meta["eos_token_id"]]
    ts.pad_piece = meta["tokens"][meta["padding_token_id"]]
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = False
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    return sp


class PyBPE:
    """SentencePiece-BPE encoding by piece scores, written from the algorithm description:
    start from single code points, repeatedly merge the adjacent pair whose concatenation is a
    (normal/user-defined) piece with the highest score (ties: leftmost), then map symbols to ids,
    byte-falling-back (<0xXX>) for symbols that are not pieces."""

    def __init__(self, meta: dict):
        self.score = {}
        self.ids = {}
        self.byte_id = {}
        for i, (t, s, ty) in enumerate(zip(meta["tokens"], meta["scores"], meta["token_type"])):
            if ty == T_BYTE:
                self.byte_id[int(t[3:5], 16)] = i
            elif ty in (T_NORMAL, T_USER_DEFINED, T_UNUSED):
                # no respelling: see build_spm()
                self.score[t] = s
                self.ids[t] = i

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        sym = list(text.replace(" ", "\u2581"))
        # doubly linked list + lazy heap
        n = len(sym)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        alive = [True] * n
        heap = []

        def push(l, r):
            if l < 0 or r < 0:
                return
            s = self.score.get(sym[l] + sym[r])
            if s is not None:
                heapq.heappush(heap, (-s, l, sym[l], sym[r]))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            negs, l, a, b = heapq.heappop(heap)
            r = nxt[l] if alive[l] else -1
            if r < 0 or not alive[l] or sym[l] != a or sym[r] != b:
                continue  # stale
            sym[l] = a + b
            alive[r] = False
            nxt[l] = nxt[r]
            if nxt[r] >= 0:
                prev[nxt[r]] = l
            push(prev[l], l)
            push(l, nxt[l])
        out = []
        i = 0  # the leftmost symbol always survives (merges keep the left one)
        while i != -1:
            t = sym[i]
            if t in self.ids:
                out.append(self.ids[t])
            else:
                out.extend(self.byte_id[b] for b in t.encode("utf-8"))
            i = nxt[i]
        return out


def gemma_encode(text, specials, special_id, frag_encode) -> list[int]:
    ids: list[int] = []
    for is_sp, piece in split_specials(text, specials):
        if is_sp:
            ids.append(special_id[piece])
        else:
            ids.extend(frag_encode(piece))
    return ids


# ============================================================================ main

def load_corpus(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [json.loads(line)["text"] for line in f.read().split("\n") if line.strip()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default="/tmp/models")
    ap.add_argument("--corpus", default=str(ROOT / "gates" / "prompts" / "tokenizer_corpus.jsonl"))
    ap.add_argument("--out-dir", default=str(HERE / "tokenizer_ids"))
    ap.add_argument("--models", nargs="*", default=CATALOG)
    ap.add_argument("--no-transformers", action="store_true", help="skip the transformers routes")
    args = ap.parse_args()

    texts = load_corpus(Path(args.corpus))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    models_dir = Path(args.models_dir)
    summary = []
    problems = 0

    for name in args.models:
        path = models_dir / f"{name}.gguf"
        meta = read_meta(path)
        rows = []
        notes = []
        if meta["model"] == "gpt2":
            direct = direct_route(meta)
            nfc_off = None
            if not args.no_transformers:
                primary, nfc_off, fixes = hf_route(models_dir, name, meta["pre"])
                notes.append("primary=transformers GGUF route + " + (", ".join(fixes) or "no fixes"))
            else:
                primary = direct
                notes.append("primary=direct GGUF build (transformers skipped)")
            if meta["pre"] == "qwen2" and nfc_off is None:
                nfc_off = Tokenizer_from(direct)
                from tokenizers import normalizers
                nfc_off.normalizer = None
            n_dis = 0
            for i, t in enumerate(texts):
                ids = encode_bt(primary, t)
                d = encode_bt(direct, t)
                if d != ids:
                    n_dis += 1
                    print(f"  DISAGREE {name} line {i}: {t!r}\n    primary={ids}\n    direct ={d}")
                row = {"text": t, "ids": ids}
                if nfc_off is not None:
                    alt = encode_bt(nfc_off, t)
                    if alt != ids:
                        row["ids_no_nfc"] = alt
                rows.append(row)
            notes.append(f"direct-build disagreements: {n_dis}")
            problems += n_dis
        elif meta["model"] == "llama":
            tt = meta["token_type"]
            specials = [t for t, ty in zip(meta["tokens"], tt) if ty in (T_CONTROL, T_USER_DEFINED)]
            special_id = {t: i for i, (t, ty) in enumerate(zip(meta["tokens"], tt)) if ty in (T_CONTROL, T_USER_DEFINED)}
            sp = build_spm(meta)
            py = PyBPE(meta)
            hf = None
            if not args.no_transformers:
                from transformers import AutoTokenizer
                hf = AutoTokenizer.from_pretrained(str(models_dir), gguf_file=f"{name}.gguf").backend_tokenizer
            n_py = n_hf = 0
            for i, t in enumerate(texts):
                ids = gemma_encode(t, specials, special_id, lambda s: list(sp.encode(s, out_type=int)))
                c1 = gemma_encode(t, specials, special_id, py.encode)
                if c1 != ids:
                    n_py += 1
                    print(f"  DISAGREE {name} (py-bpe) line {i}: {t!r}\n    spm={ids}\n    py ={c1}")
                if hf is not None:
                    c2 = encode_bt(hf, t)
                    if c2 != ids:
                        n_hf += 1
                        print(f"  note {name} (transformers) line {i}: {t!r}\n    spm={ids}\n    tf ={c2}")
                rows.append({"text": t, "ids": ids})
            notes.append(f"pure-python BPE disagreements: {n_py}")
            notes.append(f"transformers-GGUF disagreements: {n_hf}" if hf is not None else "transformers skipped")
            problems += n_py
        else:
            raise ValueError(meta["model"])
        out = out_dir / f"{name}.jsonl"
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            for r in rows:
                f.write(dump_line(r) + "\n")
        total = sum(len(r["ids"]) for r in rows)
        summary.append((name, len(rows), total, out, notes))

    print("\nsummary:")
    for name, n, total, out, notes in summary:
        print(f"  {name:30s} lines={n} total_ids={total} -> {os.path.relpath(out, ROOT)}")
        for x in notes:
            print(f"      {x}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
