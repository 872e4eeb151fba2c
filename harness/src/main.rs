//! `memra`: benchmark-and-gating harness for LLM inference, with serving as one mode.

mod config;
mod pull;
mod run;

use clap::{Parser, Subcommand};
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
    /// Fetch a model into the cache (catalog name, hf:owner/repo[:file]) or check a local one,
    /// and print its local path; --list shows the catalog.
    Pull(pull::PullArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMRA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = cli.config.resolve().and_then(|cfg| {
        if cfg.threads > 0 {
            rayon_threads(cfg.threads)?;
        }
        match &cli.command {
            Command::Run(a) => run::run(a, &cfg),
            Command::Pull(a) => pull::run(a, &cfg),
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

fn rayon_threads(n: usize) -> anyhow::Result<()> {
    memra_engine::set_threads(n).map_err(anyhow::Error::msg)
}
