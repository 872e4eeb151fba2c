#!/usr/bin/env python3
"""Generate dequantization reference data for memra's GGUF loader / dequant kernels.

The independent implementation is ONLY the `gguf` Python package
(gguf.GGUFReader for parsing, gguf.quants.dequantize for dequantization).

Outputs
  gates/oracle/fixtures/quant_types.gguf   small deterministic synthetic GGUF (all types we support)
  gates/oracle/dequant_ref.json            reference values (see README.md in this folder)

Usage
  python3 gates/oracle/make_dequant_ref.py [--models-dir /tmp/models] [--out gates/oracle/dequant_ref.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

HERE = Path(__file__).resolve().parent
CATALOG = ["smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct"]
N_FIRST = 64
PER_TYPE = 2
FIXTURE_SEED = 20240607
FIXTURE_NE = (512, 3)  # ne0 = 512 (two 256-superblocks per row), ne1 = 3 rows
FIXTURE_TYPES = [QT.F32, QT.F16, QT.BF16, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q8_0, QT.Q4_K, QT.Q5_K, QT.Q6_K]


def gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # pragma: no cover
        return "unknown"


# ----------------------------------------------------------------------------- dequant helpers

def dequant_f32(t) -> np.ndarray:
    """Whole tensor -> contiguous float32 1-D array in file element order."""
    out = gguf.quants.dequantize(t.data, t.tensor_type)
    out = np.ascontiguousarray(out, dtype=np.float32).reshape(-1)  # F16 -> f32 is exact
    assert out.size == int(t.n_elements), (t.name, out.size, t.n_elements)
    return out


def entry_for(t, all_bits: bool = False) -> dict:
    vals = dequant_f32(t)
    le = vals.astype("<f4", copy=False)
    bits = le.view("<u4")
    e = {
        "tensor": t.name,
        "ggml_type": t.tensor_type.name,
        "shape_ne": [int(x) for x in t.shape],
        "n_elements": int(t.n_elements),
        "first": [float(x) for x in le[:N_FIRST]],
        "bits_first": [int(x) for x in bits[:N_FIRST]],
        "sha256_f32le": hashlib.sha256(le.tobytes()).hexdigest(),
    }
    if all_bits:
        e["bits"] = [int(x) for x in bits]
    if not np.all(np.isfinite(vals)):
        e["non_finite_count"] = int((~np.isfinite(vals)).sum())
    return e


def pick_tensors(reader) -> list:
    by_type: dict[str, list] = {}
    for t in reader.tensors:
        by_type.setdefault(t.tensor_type.name, []).append(t)
    picked = []
    for tname in sorted(by_type):
        ts = sorted(by_type[tname], key=lambda t: (int(t.n_elements), t.name))
        chosen = [t for t in ts if t.name == "token_embd.weight"]
        for t in ts:
            if len(chosen) >= PER_TYPE:
                break
            if t not in chosen:
                chosen.append(t)
        picked.extend(chosen)
    return picked


# ----------------------------------------------------------------------------- fixture

def rand_f16_bytes(rng, n: int, lo=-2.0, hi=2.0) -> np.ndarray:
    v = rng.uniform(lo, hi, size=n).astype(np.float16)
    assert np.all(np.isfinite(v))
    return v.view(np.uint8).reshape(n, 2)


# (type, block bytes, [offsets of f16 scale fields within the block])
BLOCK_F16_FIELDS = {
    QT.Q4_0: [0],
    QT.Q4_1: [0, 2],
    QT.Q5_0: [0],
    QT.Q8_0: [0],
    QT.Q4_K: [0, 2],
    QT.Q5_K: [0, 2],
    QT.Q6_K: [208],
}


def make_fixture_tensor(qt, rng) -> tuple[np.ndarray, QT | None]:
    """Returns (numpy array in numpy order [ne1, ...], raw_dtype or None)."""
    ne0, ne1 = FIXTURE_NE
    n = ne0 * ne1
    if qt == QT.F32:
        v = rng.standard_normal(n).astype(np.float32)
        v[:8] = np.array([0.0, -0.0, 1.0, -1.0, 1e-40, -3.4e38, 3.4e38, 0.5], dtype=np.float32)  # incl. subnormal
        return v.reshape(ne1, ne0), None
    if qt == QT.F16:
        v = (rng.standard_normal(n) * 4).astype(np.float16)
        # edge values: +-0, smallest/largest subnormal, smallest normal, max, -max
        special = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x8001, 0x83FF],
                           dtype=np.uint16).view(np.float16)
        v[:special.size] = special
        return v.reshape(ne1, ne0), None
    if qt == QT.BF16:
        f = (rng.standard_normal(n) * 3).astype(np.float32)
        hi = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation -> arbitrary bf16 patterns
        special = np.array([0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80], dtype=np.uint16)
        hi[:special.size] = special
        return hi.view(np.uint8).reshape(ne1, ne0 * 2), QT.BF16
    block, tsize = gguf.GGML_QUANT_SIZES[qt]
    nblk = n // block
    raw = rng.integers(0, 256, size=(nblk, tsize), dtype=np.uint8)
    for off in BLOCK_F16_FIELDS[qt]:
        raw[:, off:off + 2] = rand_f16_bytes(rng, nblk)
    return raw.reshape(ne1, (ne0 // block) * tsize), qt


# expected metadata: key -> (value type, element type for arrays, value)
def fixture_metadata_spec():
    return [
        ("test.u8", VT.UINT8, None, 200),
        ("test.i8", VT.INT8, None, -100),
        ("test.u16", VT.UINT16, None, 65000),
        ("test.i16", VT.INT16, None, -32000),
        ("test.u32", VT.UINT32, None, 4000000000),
        ("test.i32", VT.INT32, None, -2000000000),
        ("test.u64", VT.UINT64, None, 18446744073709551615),
        ("test.i64", VT.INT64, None, -9223372036854775807),
        ("test.f32", VT.FLOAT32, None, float(np.float32(3.14159))),
        ("test.f64", VT.FLOAT64, None, 2.718281828459045),
        ("test.bool_true", VT.BOOL, None, True),
        ("test.bool_false", VT.BOOL, None, False),
        ("test.string", VT.STRING, None, "hello, memra ✓ 日本語"),
        ("test.arr_i32", VT.ARRAY, VT.INT32, [1, -2, 3, 2147483647, -2147483648]),
        ("test.arr_f32", VT.ARRAY, VT.FLOAT32, [0.5, -1.25, 1e-3]),
        ("test.arr_u8", VT.ARRAY, VT.UINT8, [0, 1, 255]),
        ("test.arr_bool", VT.ARRAY, VT.BOOL, [True, False, True]),
        ("test.arr_str", VT.ARRAY, VT.STRING, ["a", "", "ß▁<s>", "line\nbreak"]),
        ("test.arr_nested", VT.ARRAY, VT.ARRAY, [[1, 2, 3], [4], [5, 6]]),  # inner arrays: INT32
    ]


def write_fixture(path: Path) -> dict:
    rng = np.random.default_rng(FIXTURE_SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch="memra-fixture")
    meta_expected = {"general.architecture": {"type": "STRING", "value": "memra-fixture"}}
    for key, vt, sub, val in fixture_metadata_spec():
        if vt == VT.ARRAY:
            if sub == VT.ARRAY:
                w.add_key_value(key, val, VT.ARRAY)  # writer infers ARRAY of ARRAY of INT32
                meta_expected[key] = {"type": "ARRAY", "elem_type": "ARRAY", "inner_elem_type": "INT32", "value": val}
            else:
                w.add_key_value(key, val, VT.ARRAY, sub_type=sub)
                v = val
                if sub == VT.FLOAT32:
                    v = [float(np.float32(x)) for x in val]
                    meta_expected[key] = {"type": "ARRAY", "elem_type": sub.name, "value": v,
                                          "bits": [int(np.float32(x).view(np.uint32)) for x in val]}
                else:
                    meta_expected[key] = {"type": "ARRAY", "elem_type": sub.name, "value": v}
        else:
            w.add_key_value(key, val, vt)
            d = {"type": vt.name, "value": val}
            if vt == VT.FLOAT32:
                d["bits"] = int(np.float32(val).view(np.uint32))
            if vt == VT.FLOAT64:
                d["bits_u64"] = struct.unpack("<Q", struct.pack("<d", val))[0]
            meta_expected[key] = d
    names = []
    for qt in FIXTURE_TYPES:
        arr, raw = make_fixture_tensor(qt, rng)
        name = f"fixture.{qt.name.lower()}"
        if raw is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=raw)
        names.append(name)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return meta_expected


def verify_fixture_metadata(reader, expected: dict) -> None:
    for key, exp in expected.items():
        f = reader.fields[key]
        t = VT(f.types[0])
        assert t.name == exp["type"], (key, t, exp)
        if t == VT.ARRAY:
            assert VT(f.types[1]).name == exp["elem_type"], (key, f.types)
            if exp["elem_type"] == "ARRAY":
                continue  # reader flattens nested arrays; bytes checked by the writer round trip below
            got = f.contents()
        else:
            got = f.contents()
        assert got == exp["value"], (key, got, exp["value"])


def check_nested_array_bytes(path: Path) -> None:
    """Tiny hand parser for the nested array key, independent of GGUFReader.contents()."""
    data = path.read_bytes()
    needle = b"test.arr_nested"
    i = data.index(needle) + len(needle)
    vtype, = struct.unpack_from("<I", data, i); i += 4
    assert vtype == VT.ARRAY
    etype, n = struct.unpack_from("<IQ", data, i); i += 12
    assert etype == VT.ARRAY and n == 3
    out = []
    for _ in range(n):
        it, m = struct.unpack_from("<IQ", data, i); i += 12
        assert it == VT.INT32
        out.append(list(struct.unpack_from(f"<{m}i", data, i))); i += 4 * m
    assert out == [[1, 2, 3], [4], [5, 6]], out


# ----------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default="/tmp/models")
    ap.add_argument("--out", default=str(HERE / "dequant_ref.json"))
    ap.add_argument("--fixture", default=str(HERE / "fixtures" / "quant_types.gguf"))
    args = ap.parse_args()

    result = {"generator": f"gguf {gguf_version()}", "models": {}, "fixture": [], "fixture_metadata": {}}

    for name in CATALOG:
        p = Path(args.models_dir) / f"{name}.gguf"
        if not p.exists():
            print(f"WARNING: {p} missing, skipping", file=sys.stderr)
            continue
        r = gguf.GGUFReader(str(p))
        entries = []
        for t in pick_tensors(r):
            e = entry_for(t)
            entries.append(e)
            print(f"{name:30s} {e['ggml_type']:5s} {e['tensor']:32s} ne={e['shape_ne']} n={e['n_elements']}")
        result["models"][name] = entries
        del r

    fx = Path(args.fixture)
    meta = write_fixture(fx)
    r = gguf.GGUFReader(str(fx))
    verify_fixture_metadata(r, meta)
    check_nested_array_bytes(fx)
    for t in r.tensors:
        e = entry_for(t, all_bits=True)
        assert e["shape_ne"] == list(FIXTURE_NE), e["shape_ne"]
        assert "non_finite_count" not in e, e["tensor"]
        result["fixture"].append(e)
        print(f"{'fixture':30s} {e['ggml_type']:5s} {e['tensor']:32s} ne={e['shape_ne']} n={e['n_elements']}")
    result["fixture_metadata"] = meta
    result["fixture_file"] = {
        "path": os.path.relpath(fx, HERE.parent.parent) if fx.is_absolute() else str(fx),
        "sha256": hashlib.sha256(fx.read_bytes()).hexdigest(),
        "size": fx.stat().st_size,
        "seed": FIXTURE_SEED,
        "alignment": 32,
        "kv_order": list(meta.keys()),
        "tensor_order": [t.name for t in r.tensors],
    }

    out = Path(args.out)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes), fixture {fx} ({fx.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
