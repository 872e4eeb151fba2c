//! Tokenizer parity: ids identical to HF `tokenizers` (and, for Gemma, SentencePiece) on the
//! committed corpus (gates/prompts/tokenizer_corpus.jsonl; expected ids made by
//! gates/oracle/make_tokenizer_ref.py), for tokenizers built from GGUF metadata.

mod common;

use memra_engine::formats::gguf::GgufFile;
use memra_engine::tokenizer::Tokenizer;

#[test]
fn corpus_is_broad() {
    let corpus = common::jsonl("gates/prompts/tokenizer_corpus.jsonl");
    assert!(corpus.len() >= 300);
    let texts: Vec<&str> = corpus.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert!(texts.contains(&""), "empty string");
    assert!(
        texts
            .iter()
            .any(|t| t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))),
        "CJK"
    );
    assert!(
        texts.iter().any(|t| t.contains("<|im_start|>")),
        "special tokens"
    );
    assert!(texts.iter().any(|t| t.contains("   ")), "whitespace runs");
}

#[test]
fn ids_match_reference_for_all_real_models() {
    for name in common::REAL_MODELS {
        let g = GgufFile::open(common::model_path(name)).unwrap();
        let tk = Tokenizer::from_gguf(&g).unwrap();
        let refs = common::jsonl(&format!("gates/oracle/tokenizer_ids/{name}.jsonl"));
        assert!(refs.len() >= 300, "{name}");
        let mut bad = Vec::new();
        for (i, r) in refs.iter().enumerate() {
            let text = r["text"].as_str().unwrap();
            let ids: Vec<u32> = r["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let got = tk.encode(text, false).unwrap();
            if got != ids {
                bad.push(format!("line {i} {text:?}: expected {ids:?}, got {got:?}"));
            }
        }
        assert!(
            bad.is_empty(),
            "{name}: {} of {} differ:\n{}",
            bad.len(),
            refs.len(),
            bad[..bad.len().min(10)].join("\n")
        );
    }
}

#[test]
fn bos_follows_add_bos_and_decode_round_trips() {
    let g = GgufFile::open(common::model_path("gemma-3-270m")).unwrap();
    let tk = Tokenizer::from_gguf(&g).unwrap();
    let ids = tk.encode("Hello world", true).unwrap();
    assert_eq!(ids[0], 2, "Gemma adds <bos>");
    assert_eq!(tk.decode(&ids, true).unwrap(), "Hello world");
    let g = GgufFile::open(common::model_path("smollm2-135m-instruct")).unwrap();
    let tk = Tokenizer::from_gguf(&g).unwrap();
    let ids = tk.encode("Hello world", true).unwrap();
    assert_ne!(ids[0], 1, "SmolLM2 has add_bos false");
    assert_eq!(tk.decode(&ids, false).unwrap(), "Hello world");
    assert!(tk.eos.contains(&2));
}

#[test]
fn token_bytes_concatenate_to_the_text() {
    // Every corpus text, every real model: the tokens' own bytes, joined, are the bytes of the
    // decoded text (the text itself, except where the tokenizer's own round trip changes it, as
    // Gemma's literal "▁" decoding to a space), also where a token ends inside a character (CJK,
    // emoji), where decoding one token alone shows U+FFFD.
    let corpus = common::jsonl("gates/prompts/tokenizer_corpus.jsonl");
    for name in common::REAL_MODELS {
        let g = GgufFile::open(common::model_path(name)).unwrap();
        let tk = Tokenizer::from_gguf(&g).unwrap();
        let (mut bad, mut partial) = (Vec::new(), 0);
        for line in &corpus {
            let text = line["text"].as_str().unwrap();
            let ids = tk.encode(text, false).unwrap();
            let mut joined = Vec::new();
            for &id in &ids {
                let b = tk.token_bytes(id).unwrap();
                partial += usize::from(std::str::from_utf8(&b).is_err());
                joined.extend(b);
            }
            let decoded = tk.decode(&ids, false).unwrap();
            if joined != decoded.as_bytes() {
                bad.push(format!("{text:?}: {:?}", String::from_utf8_lossy(&joined)));
            }
        }
        assert!(
            bad.is_empty(),
            "{name}: {} differ:\n{}",
            bad.len(),
            bad[..bad.len().min(5)].join("\n")
        );
        assert!(
            partial > 0,
            "{name}: the corpus has tokens that end inside a character"
        );
    }
    let g = GgufFile::open(common::model_path("smollm2-135m-instruct")).unwrap();
    let tk = Tokenizer::from_gguf(&g).unwrap();
    assert_eq!(tk.token_bytes(u32::MAX), None);
}
