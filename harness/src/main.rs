//! `memra`: benchmark-and-gating harness for LLM inference, with serving as one mode.

mod backends;
mod bench;
mod boards;
mod config;
mod dates;
mod defaults;
mod gate;
mod probe;
mod pull;
mod quantize;
mod run;
mod serve;
mod synth;
mod tune;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use config::ConfigArgs;

/// memra: an LLM inference engine whose fast paths are gated against plain decode.
#[derive(Debug, Parser)]
#[command(name = "memra", version, about)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate text from a prompt; prints the text, prefill and decode tok/s, and whether
    /// prefill agrees bit for bit with token-by-token decode.
    Run(run::RunArgs),
    /// Fetch a model into the cache (catalog name, hf:owner/repo[@revision][:file],
    /// synth:SHAPE:DTYPE[:SEED]) or check a local one, and print its local path; --list shows the
    /// catalog.
    Pull(pull::PullArgs),
    /// Serve models over an OpenAI-compatible HTTP API (chat and text completions, streaming,
    /// tokenize, metrics); with no --model it serves smollm2-135m-instruct, pulled on first use.
    Serve(serve::ServeArgs),
    /// Run the exactness gates in gates/*.toml (fast path vs plain decode; HF and tokenizer
    /// parity); --canary runs each gate's deliberately broken arm, which must turn it red.
    Gate(gate::GateArgs),
    /// Measure: decode tok/s (batch sizes, context depths; achieved GB/s against the measured copy
    /// bandwidth), time to first token, serving under load (closed loop and Poisson arrivals
    /// through `memra serve`), speculative speedup and acceptance, prefix-hit TTFT; one JSONL row
    /// per figure in research/tune-data/. --compare REF re-measures REF's cells and flags changes
    /// beyond the measured spread.
    Bench(bench::BenchArgs),
    /// Sweep tunable constants on this device (kernel tiles, attention split, prefill chunk, the
    /// speculation policy's thresholds), run the gates with the kept set, and write
    /// boards/defaults/<device>.toml with provenance.
    Tune(tune::TuneArgs),
    /// Device facts (name, compute capability, SMs, memory) and measured copy bandwidth;
    /// --self-check compiles every CUDA kernel and compares it with the CPU reference.
    Probe(probe::ProbeArgs),
    /// Write a random-weight checkpoint at a real model's shape (GGUF or an HF safetensors
    /// directory, with tokenizer and config), deterministic by seed; --list shows the shapes.
    Synth(synth::SynthArgs),
    /// Re-quantize a GGUF model's matrices to Q8_0 (a format with the fast batched kernels on
    /// the GPU), copying norms, biases and metadata.
    Quantize(quantize::QuantizeArgs),
    /// Regenerate the performance boards from research/tune-data/*.jsonl: the tables between the
    /// markers of docs/PERFORMANCE.md and the README, and PNG charts in boards/ (needs the `boards`
    /// feature: cargo run --release -p memra --features boards -- boards).
    Boards(boards::BoardsArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMRA_LOG")
                // Warnings from everything; memra's own start-up lines (which defaults file is
                // used or that the portable defaults run, the CUDA device, each served model) at
                // info. `MEMRA_LOG` replaces the whole filter.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,memra=info,memra_engine=info")
                }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    config::unset_empty_env_vars();
    let matches = command_with_help_per_subcommand().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let serve_flags = cli.config.serve_flags();
    if let (Command::Bench(a), Some(m)) = (&cli.command, matches.subcommand_matches("bench")) {
        let checked = bench::check_scenario_flags(a, m)
            .and_then(|()| bench::check_serve_flags(a, &serve_flags));
        if let Err(e) = checked {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::from(2);
        }
    }
    if !matches!(cli.command, Command::Serve(_) | Command::Bench(_)) {
        die_quietly_on_a_closed_pipe();
    }
    if !serve_flags.is_empty() && !matches!(cli.command, Command::Serve(_) | Command::Bench(_)) {
        let (verb, noun, pron) = if serve_flags.len() == 1 {
            ("is a", "option", "it")
        } else {
            ("are", "options", "them")
        };
        eprintln!(
            "error: {} {verb} `memra serve` (and `bench serve`) {noun}; this command would ignore \
             {pron}",
            serve_flags.join(", ")
        );
        return std::process::ExitCode::from(2);
    }
    let result = cli.config.resolve().and_then(|mut cfg| {
        // Commands that run a backend or its kernels take the tuned defaults of the device they
        // run on (probe's self-check and kernel tables test the defines the engine would use;
        // tune sweeps on top of them, or from the built-in values with --device-defaults none).
        if matches!(
            cli.command,
            Command::Run(_)
                | Command::Serve(_)
                | Command::Gate(_)
                | Command::Bench(_)
                | Command::Probe(_)
                | Command::Tune(_)
        ) {
            defaults::apply(&mut cfg)?;
        }
        if cfg.threads > 0 {
            rayon_threads(cfg.threads)?;
        }
        match &cli.command {
            Command::Run(a) => run::run(a, &cfg),
            Command::Gate(a) => gate::run(a, &cfg),
            Command::Pull(a) => pull::run(a, &cfg),
            Command::Serve(a) => serve::run(a, &cfg),
            Command::Probe(a) => probe::run(a, &cfg),
            Command::Bench(a) => bench::run(a, &cfg),
            Command::Tune(a) => tune::run(a, &cfg),
            Command::Synth(a) => synth::run(a, &cfg),
            Command::Quantize(a) => quantize::run(a, &cfg),
            Command::Boards(a) => boards::run(a),
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The command line, with the serve-only flags (global, so that `bench serve` can pass them to
/// its `memra serve` child) left out of the help of the commands that refuse them: each of those
/// gets a hidden copy, which clap's propagation of global arguments then leaves in place.
fn command_with_help_per_subcommand() -> clap::Command {
    let mut cmd = Cli::command();
    let serve_only: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.get_help_heading() == Some(config::SERVE_HEADING))
        .cloned()
        .collect();
    let others: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "serve" && n != "bench")
        .collect();
    for name in others {
        cmd = cmd.mut_subcommand(name, |sc| {
            sc.args(serve_only.iter().map(|a| a.clone().hide(true)))
        });
    }
    cmd
}

/// Restores the default SIGPIPE action (the Rust runtime ignores it, so a write to a closed pipe
/// makes `println!` panic): `memra pull --list | head -1` then ends quietly, as Unix tools do.
/// Not for `serve` and `bench` (sockets, child processes), which handle write errors themselves.
fn die_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to the default has no preconditions; it runs before
    // any other thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn rayon_threads(n: usize) -> anyhow::Result<()> {
    memra_engine::set_threads(n).map_err(anyhow::Error::msg)
}
