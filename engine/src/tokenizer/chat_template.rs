//! Chat templates: the model's own Jinja template (GGUF `tokenizer.chat_template` or
//! `tokenizer_config.json` `chat_template`) rendered with minijinja, with the Python string
//! methods HF templates use (`minijinja-contrib` pycompat) and HF's `raise_exception` and
//! `strftime_now` helpers.

use crate::error::{Error, Result};
use minijinja::{context, Environment, ErrorKind, Value};

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

fn raise_exception(msg: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
}

fn strftime_now(_fmt: String) -> String {
    // Deterministic output matters more than the wall-clock date inside a prompt: templates use
    // this for a "Today is" line, which would otherwise change the prompt (and the prefix cache)
    // every day.
    "26 Jul 2024".to_string()
}

impl ChatTemplate {
    /// Compiles `source`. Errors: a template syntax error, with minijinja's message.
    pub fn new(source: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| Error::Template(format!("invalid template: {e:#}")))?;
        Ok(ChatTemplate { env })
    }

    /// Renders `messages` (a JSON array of `{role, content, ...}`), with optional `tools`, the
    /// special-token strings, and `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<String> {
        let tmpl = self.env.get_template("chat").expect("added in new");
        let tools = tools.map(Value::from_serialize);
        tmpl.render(context! {
            messages => Value::from_serialize(messages),
            tools => tools,
            add_generation_prompt => add_generation_prompt,
            bos_token => bos_token,
            eos_token => eos_token,
        })
        .map_err(|e| Error::Template(format!("{e:#}")))
    }
}
