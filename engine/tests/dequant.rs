//! Dequantization is bit-exact against the `gguf` Python package (gates/oracle/dequant_ref.json,
//! made by gates/oracle/make_dequant_ref.py) on tensors of the real model files and on a fixture
//! holding every supported type; the fixture also checks every GGUF metadata value type.

mod common;

use memra_engine::formats::gguf::{GgufFile, MetaValue};
use memra_engine::formats::TensorSource;
use memra_engine::quant::dequantize_row;
use sha2::{Digest, Sha256};

fn check_entries(src: &dyn TensorSource, entries: &[serde_json::Value], with_all_bits: bool) {
    for e in entries {
        let name = e["tensor"].as_str().unwrap();
        let t = src
            .get(name)
            .unwrap_or_else(|| panic!("tensor {name} missing"));
        assert_eq!(t.dtype.name(), e["ggml_type"].as_str().unwrap(), "{name}");
        let ne: Vec<usize> = e["shape_ne"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let shape: Vec<usize> = ne.iter().rev().copied().collect();
        assert_eq!(t.shape, shape, "{name}");
        let n = e["n_elements"].as_u64().unwrap() as usize;
        let mut out = vec![0f32; n];
        dequantize_row(t.dtype, t.data.bytes(), &mut out);
        let first: Vec<u32> = e["bits_first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let got: Vec<u32> = out[..first.len()].iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, first, "{name}: first values");
        if with_all_bits {
            let all: Vec<u32> = e["bits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, all, "{name}: all values");
        }
        let mut h = Sha256::new();
        for v in &out {
            h.update(v.to_le_bytes());
        }
        assert_eq!(
            hex::encode(h.finalize()),
            e["sha256_f32le"].as_str().unwrap(),
            "{name}: sha256 of the whole tensor"
        );
    }
}

#[test]
fn fixture_every_type_bit_exact() {
    let r = common::json("gates/oracle/dequant_ref.json");
    let g = GgufFile::open(common::repo().join("gates/oracle/fixtures/quant_types.gguf")).unwrap();
    let entries = r["fixture"].as_array().unwrap();
    assert_eq!(entries.len(), 10, "one tensor per supported type");
    check_entries(&g, entries, true);
}

#[test]
fn real_models_bit_exact() {
    let r = common::json("gates/oracle/dequant_ref.json");
    for name in common::REAL_MODELS {
        let g = GgufFile::open(common::model_path(name)).unwrap();
        let entries = r["models"][name].as_array().unwrap();
        assert!(entries.len() >= 3, "{name}: reference entries");
        check_entries(&g, entries, false);
    }
}

fn meta_to_json(v: &MetaValue) -> serde_json::Value {
    use serde_json::json;
    match v {
        MetaValue::U8(x) => json!(x),
        MetaValue::I8(x) => json!(x),
        MetaValue::U16(x) => json!(x),
        MetaValue::I16(x) => json!(x),
        MetaValue::U32(x) => json!(x),
        MetaValue::I32(x) => json!(x),
        MetaValue::U64(x) => json!(x),
        MetaValue::I64(x) => json!(x),
        MetaValue::F32(x) => json!(x.to_bits()),
        MetaValue::F64(x) => json!(x.to_bits()),
        MetaValue::Bool(x) => json!(x),
        MetaValue::String(s) => json!(s),
        MetaValue::Array(a) => serde_json::Value::Array(a.iter().map(meta_to_json).collect()),
    }
}

#[test]
fn fixture_metadata_every_value_type() {
    let r = common::json("gates/oracle/dequant_ref.json");
    let g = GgufFile::open(common::repo().join("gates/oracle/fixtures/quant_types.gguf")).unwrap();
    let want = r["fixture_metadata"].as_object().unwrap();
    assert!(want.len() >= 19);
    for (key, w) in want {
        let v = g.get(key).unwrap_or_else(|| panic!("{key} missing"));
        let ty = w["type"].as_str().unwrap();
        let type_ok = matches!(
            (ty, v),
            ("UINT8", MetaValue::U8(_))
                | ("INT8", MetaValue::I8(_))
                | ("UINT16", MetaValue::U16(_))
                | ("INT16", MetaValue::I16(_))
                | ("UINT32", MetaValue::U32(_))
                | ("INT32", MetaValue::I32(_))
                | ("UINT64", MetaValue::U64(_))
                | ("INT64", MetaValue::I64(_))
                | ("FLOAT32", MetaValue::F32(_))
                | ("FLOAT64", MetaValue::F64(_))
                | ("BOOL", MetaValue::Bool(_))
                | ("STRING", MetaValue::String(_))
                | ("ARRAY", MetaValue::Array(_))
        );
        assert!(type_ok, "{key}: expected {ty}, got {v:?}");
        // Floats compare by bit pattern; everything else by value.
        let expected = if let Some(b) = w.get("bits") {
            b.clone()
        } else if let Some(b) = w.get("bits_u64") {
            b.clone()
        } else {
            w["value"].clone()
        };
        assert_eq!(meta_to_json(v), expected, "{key}");
    }
}
