//! Chat templates render from the model's own template: system, multi-turn,
//! add_generation_prompt; a model without one is a clear error.

mod common;

use memra_engine::formats::gguf::GgufFile;
use memra_engine::tokenizer::Tokenizer;
use serde_json::json;

fn tk(name: &str) -> Tokenizer {
    Tokenizer::from_gguf(&GgufFile::open(common::model_path(name)).unwrap()).unwrap()
}

#[test]
fn smollm2_chatml_multi_turn() {
    let t = tk("smollm2-135m-instruct");
    let msgs = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Capital of France?"}
    ]);
    let s = t.apply_chat_template(&msgs, None, true).unwrap();
    assert_eq!(
        s,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"
    );
    let no_gen = t.apply_chat_template(&msgs, None, false).unwrap();
    assert!(!no_gen.ends_with("<|im_start|>assistant\n"));
    // Without a system message the template inserts its default one.
    let s = t
        .apply_chat_template(&json!([{"role": "user", "content": "Hi"}]), None, true)
        .unwrap();
    assert!(
        s.starts_with("<|im_start|>system\n")
            && s.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
        "{s}"
    );
}

#[test]
fn qwen_template_with_default_system_and_tools() {
    let t = tk("qwen2.5-coder-0.5b-instruct");
    let s = t
        .apply_chat_template(&json!([{"role": "user", "content": "Hi"}]), None, true)
        .unwrap();
    assert!(s.starts_with("<|im_start|>system\nYou are Qwen"), "{s}");
    assert!(
        s.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
        "{s}"
    );
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let s = t
        .apply_chat_template(
            &json!([{"role": "user", "content": "Weather?"}]),
            Some(&tools),
            true,
        )
        .unwrap();
    assert!(s.contains("get_weather") && s.contains("<tools>"), "{s}");
}

#[test]
fn gemma_base_has_no_template() {
    let t = tk("gemma-3-270m");
    assert!(!t.has_chat_template());
    let e = t
        .apply_chat_template(&json!([{"role": "user", "content": "Hi"}]), None, true)
        .unwrap_err();
    assert!(e.to_string().contains("no chat template"), "{e}");
    assert!(!t.encode("plain completion works", true).unwrap().is_empty());
}
