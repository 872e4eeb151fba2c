//! `memra run`: one generation on the command line.

use crate::config::Config;
use anyhow::{Context, Result};
use clap::Args;
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::loader::LoadedModel;
use memra_engine::sample::SamplingParams;
use std::io::Write;

/// Arguments of `memra run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Model: a catalog name (see `memra pull --list`), hf:owner/repo[@revision][:file],
    /// synth:SHAPE:DTYPE[:SEED], a .gguf file or an HF checkpoint directory.
    pub model: String,
    /// Prompt text.
    #[arg(long)]
    pub prompt: String,
    /// Wrap the prompt as one user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// System message (with --chat).
    #[arg(long)]
    pub system: Option<String>,
    /// Tokens to generate at most (at least 1; the prompt plus these must fit the model's
    /// context and the KV cache) [default: 128, or what fits].
    #[arg(long,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=crate::bench::MAX_TOKENS))]
    pub max_tokens: Option<usize>,
    /// Sampling temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.7, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Nucleus sampling mass (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Keep the K most likely tokens (0 = off).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Drop tokens below this fraction of the top probability (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    /// Repetition penalty (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// Presence penalty, -2..2.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub presence_penalty: f32,
    /// Frequency penalty, -2..2.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub frequency_penalty: f32,
    /// Seed of the counter-based sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Generate exactly --max-tokens tokens, ignoring end-of-sequence tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Skip the prefill/decode agreement check.
    #[arg(long)]
    pub no_check: bool,
    /// Speculative decoding: ngram[:N] (prompt lookup), layerskip:L (the first L layers draft) or
    /// draft:MODEL (a smaller model with the same tokenizer). The output is checked to be
    /// identical to plain decode.
    #[arg(long)]
    pub spec: Option<String>,
    /// Draft tokens per verify with --spec (1..=16) [default: 4].
    #[arg(long)]
    pub k: Option<usize>,
}

pub use crate::backends::backend_factory;

/// `memra run`'s --max-tokens when none is given (cut to what fits).
const DEFAULT_MAX_TOKENS: usize = 128;

/// A backend for `loaded` as the config asks.
pub fn make_engine(loaded: &LoadedModel, cfg: &Config) -> Result<Engine> {
    let (_, make) = backend_factory(&loaded.model, cfg)?;
    Ok(Engine::new(make()?, cfg.prefill_chunk))
}

/// Runs `memra run`.
pub fn run(args: &RunArgs, cfg: &Config) -> Result<()> {
    if args.k.is_some() && args.spec.is_none() {
        anyhow::bail!("--k sets the draft length of --spec; give --spec too");
    }
    if args.system.is_some() && !args.chat {
        anyhow::bail!("--system is a message of the chat template; give --chat too");
    }
    let path = crate::pull::resolve(&args.model, cfg)?;
    let loaded = memra_engine::loader::load(&path)?;
    let tk = &loaded.tokenizer;
    let text = if args.chat {
        let mut messages = Vec::new();
        if let Some(s) = &args.system {
            messages.push(serde_json::json!({"role": "system", "content": s}));
        }
        messages.push(serde_json::json!({"role": "user", "content": args.prompt}));
        tk.apply_chat_template(&serde_json::Value::Array(messages), None, true)?
    } else {
        args.prompt.clone()
    };
    // A chat template writes its own BOS when the model wants one.
    let prompt = tk.encode(&text, !args.chat)?;
    let params = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repetition_penalty,
        presence_penalty: args.presence_penalty,
        frequency_penalty: args.frequency_penalty,
        logit_bias: Vec::new(),
        seed: args.seed,
    };
    params.validate()?;
    // The positions a generation may take: the model's context, capped by the KV cache (the
    // factory's block count; on CUDA the weights it uploads are kept for the engine). As the
    // server does, a --max-tokens that does not fit is refused and the default is cut to fit.
    let context = loaded.model.config.max_context;
    let (kv_blocks, make_backend) = backend_factory(&loaded.model, cfg)?;
    let kv = kv_blocks * cfg.kv_block_size;
    let (room, what) = if kv < context {
        (kv, "the KV cache (--kv-cache-mib)")
    } else {
        (context, "the model's context")
    };
    let max_tokens = args.max_tokens.unwrap_or_else(|| {
        DEFAULT_MAX_TOKENS
            .min(room.saturating_sub(prompt.len()))
            .max(1)
    });
    check_room(prompt.len(), max_tokens, room, what)?;
    let req = GenerateRequest {
        prompt: prompt.clone(),
        params,
        max_tokens,
        stop_ids: if args.ignore_eos {
            vec![]
        } else {
            tk.eos.clone()
        },
        sequence: 0,
    };
    if let Some(spec) = &args.spec {
        let (method, draft) = match spec.split_once(':') {
            Some(("draft", m)) => ("draft", Some(m)),
            _ => (spec.as_str(), None),
        };
        let sp =
            memra_engine::spec::SpecParams::parse(method, args.k.unwrap_or(4)).map_err(|e| {
                // On the command line the draft model is named in the spec itself.
                anyhow::Error::msg(e.replace("layerskip:L, draft)", "layerskip:L, draft:MODEL)"))
            })?;
        let draft = match draft {
            Some(m) => Some(memra_engine::loader::load(&crate::pull::resolve(m, cfg)?)?),
            None if method == "draft" => anyhow::bail!("--spec draft needs a model: draft:MODEL"),
            None => None,
        };
        return run_speculative(&loaded, draft.as_ref(), cfg, &req, sp);
    }
    // The factory sized above: its block count is the KV cache the room was checked against.
    let mut engine = Engine::new(make_backend()?, cfg.prefill_chunk);
    let mut out = std::io::stdout().lock();
    let mut generated: Vec<u32> = Vec::new();
    let mut printed = String::new();
    let gen = engine.generate(&req, |t| {
        generated.push(t);
        // Print the newly completed text; a partial UTF-8 sequence waits for its next token.
        if let Ok(s) = tk.decode(&generated, true) {
            if !s.ends_with('\u{FFFD}') && s.starts_with(&printed) {
                let _ = out.write_all(&s.as_bytes()[printed.len()..]);
                let _ = out.flush();
                printed = s;
            }
        }
    })?;
    let full = tk.decode(&gen.tokens, true)?;
    if full.len() > printed.len() && full.starts_with(&printed) {
        out.write_all(&full.as_bytes()[printed.len()..])?;
    }
    writeln!(out)?;
    drop(out);
    let n = gen.tokens.len();
    eprintln!(
        "prefill: {} tokens in {:.3} s ({:.1} tok/s) | decode: {} tokens in {:.3} s ({:.1} tok/s) | finish: {:?} | backend {}",
        prompt.len(),
        gen.prefill_secs,
        prompt.len() as f64 / gen.prefill_secs.max(1e-9),
        n,
        gen.decode_secs,
        n.saturating_sub(1) as f64 / gen.decode_secs.max(1e-9),
        gen.finish,
        engine.backend.name(),
    );
    if !args.no_check {
        let decoded = engine
            .prompt_logits_token_by_token(&prompt)
            .context("token-by-token check")?;
        let same = decoded.len() == gen.prompt_logits.len()
            && decoded
                .iter()
                .zip(&gen.prompt_logits)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        let max_diff = decoded
            .iter()
            .zip(&gen.prompt_logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "prefill/decode agreement: last-position logits {} (prefill chunk {}, vs token-by-token; max |diff| {max_diff})",
            if same { "bit-identical" } else { "DIFFER" },
            cfg.prefill_chunk
        );
        if !same {
            anyhow::bail!("prefill and token-by-token decode disagree");
        }
    }
    Ok(())
}

/// Refuses a generation whose prompt plus `max_tokens` does not fit `room` positions (the last
/// generated token needs no KV slot, but the server counts it too: prompt + max_tokens ≤ the
/// context, as OpenAI's API and vLLM do).
fn check_room(prompt: usize, max_tokens: usize, room: usize, what: &str) -> Result<()> {
    if prompt >= room {
        anyhow::bail!(
            "the prompt has {prompt} tokens but {what} holds {room}: no room to generate"
        );
    }
    if prompt.saturating_add(max_tokens) > room {
        anyhow::bail!(
            "--max-tokens {max_tokens} with a prompt of {prompt} tokens does not fit {what} of \
             {room} tokens: at most {} can be generated",
            room - prompt
        );
    }
    Ok(())
}

/// `memra run --spec`: the request through the scheduler with speculation, timed, then the same
/// request by plain decode; the two outputs must be identical.
fn run_speculative(
    loaded: &LoadedModel,
    draft: Option<&LoadedModel>,
    cfg: &Config,
    req: &GenerateRequest,
    spec: memra_engine::spec::SpecParams,
) -> Result<()> {
    use memra_engine::sched::{Event, SchedulerConfig, SchedulerHandle, Submit};
    let (_, make) = backend_factory(&loaded.model, cfg)?;
    let make_draft = match draft {
        Some(d) => Some(backend_factory(&d.model, cfg)?.1),
        None => None,
    };
    let h = SchedulerHandle::spawn_with_draft(
        make,
        make_draft,
        SchedulerConfig {
            max_batch_tokens: cfg.prefill_chunk.max(spec.k + 1),
            max_context: loaded.model.config.max_context,
            spec_max_running: cfg.spec_max_running,
            spec_min_acceptance: cfg.spec_min_acceptance,
            spec_row_cost: cfg.spec_row_cost,
            spec_verify_base: cfg.spec_verify_base,
            ..Default::default()
        },
    )?;
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = std::time::Instant::now();
    h.submit(Submit {
        id: 1,
        prompt: req.prompt.clone(),
        params: req.params.clone(),
        max_tokens: req.max_tokens,
        stop_ids: req.stop_ids.clone(),
        n: 1,
        logprobs: None,
        tenant: String::new(),
        return_logits: false,
        spec: Some(spec),
        events: Box::new(move |e| tx.send(e).is_ok()),
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut tokens, mut first, mut counts) = (Vec::new(), None, (0, 0));
    loop {
        match rx.recv()? {
            Event::Token { token, .. } => {
                first.get_or_insert_with(|| t0.elapsed());
                tokens.push(token);
            }
            Event::Finished {
                drafted, accepted, ..
            } => counts = (drafted, accepted),
            Event::Done => break,
            Event::Error(e) => anyhow::bail!("{e}"),
            Event::Started { .. } => {}
        }
    }
    let total = t0.elapsed();
    h.shutdown();
    println!("{}", loaded.tokenizer.decode(&tokens, true)?);
    let first = first.unwrap_or(total);
    let decode = (total - first).as_secs_f64();
    eprintln!(
        "speculative {} k={}: {} tokens; decode {:.1} tok/s; drafted {}, accepted {} ({:.0}%)",
        spec.method,
        spec.k,
        tokens.len(),
        tokens.len().saturating_sub(1) as f64 / decode.max(1e-9),
        counts.0,
        counts.1,
        100.0 * counts.1 as f64 / (counts.0.max(1)) as f64
    );
    let mut engine = make_engine(loaded, cfg)?;
    let t1 = std::time::Instant::now();
    let plain = engine.generate(req, |_| {})?;
    eprintln!(
        "plain decode: {:.1} tok/s ({:.2} s in all vs {:.2} s speculative); output {}",
        plain.tokens.len().saturating_sub(1) as f64 / plain.decode_secs.max(1e-9),
        t1.elapsed().as_secs_f64(),
        total.as_secs_f64(),
        if plain.tokens == tokens {
            "identical to plain decode"
        } else {
            "DIFFERS from plain decode"
        }
    );
    if plain.tokens != tokens {
        anyhow::bail!("speculative output differs from plain decode");
    }
    Ok(())
}
