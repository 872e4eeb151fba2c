//! Gate definitions: `gates/*.toml`, one `[[gate]]` table per gate.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// One gate: a fast path (arm B) against its reference (arm A) at a comparison level, plus the
/// canary (a deliberately broken arm B) that must turn it red.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// Unique name, `what/model`.
    pub name: String,
    /// Which comparison this is (see [`Kind`]).
    pub kind: Kind,
    /// Model: catalog name, path, or `qwen3-random` (made by gates/oracle/make_qwen3_random.py).
    pub model: String,
    /// Lanes the gate runs in (default: cpu and cuda).
    #[serde(default = "default_lanes")]
    pub lanes: Vec<String>,
    /// Prompt set: JSON lines with a `text` field, relative to the repository.
    #[serde(default)]
    pub prompts: Option<String>,
    /// How many prompts of the set to use.
    #[serde(default = "default_n_prompts")]
    pub n_prompts: usize,
    /// Tokens generated per request.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
    /// Prefill chunk sizes for `chunked_prefill` (0 = whole prompt).
    #[serde(default)]
    pub chunk_sizes: Vec<usize>,
    /// Sampling for seeded gates; absent = greedy.
    #[serde(default)]
    pub sampling: Option<Sampling>,
    /// Choices for `n_choices`.
    #[serde(default = "default_n")]
    pub n: u32,
    /// Drafters for `speculative` (`ngram[:N]`, `layerskip:L`).
    #[serde(default)]
    pub drafters: Vec<String>,
    /// Draft lengths K for `speculative`.
    #[serde(default)]
    pub ks: Vec<usize>,
    /// Comparison level.
    pub level: Level,
    /// Bound for `tolerance` (max |Δlogit| over the reference's top-20).
    #[serde(default)]
    pub bound: Option<f32>,
    /// Reference data for Level B gates, relative to the repository.
    #[serde(default)]
    pub reference: Option<String>,
    /// The deliberately broken arm.
    pub canary: Canary,
    /// CUDA lane: the graphed arm pads its steps to batch-size buckets of this width (as
    /// `cuda_graph_bucket`, which it overrides for this gate); absent = as configured.
    #[serde(default)]
    pub graph_bucket: Option<usize>,
}

fn default_lanes() -> Vec<String> {
    vec!["cpu".into(), "cuda".into()]
}
fn default_n_prompts() -> usize {
    8
}
fn default_max_tokens() -> usize {
    8
}
fn default_n() -> u32 {
    1
}

/// Seeded sampling parameters of a gate.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    pub temperature: f32,
    #[serde(default = "one")]
    pub top_p: f32,
    #[serde(default)]
    pub top_k: usize,
    #[serde(default)]
    pub min_p: f32,
    #[serde(default = "one")]
    pub repetition_penalty: f32,
    #[serde(default)]
    pub presence_penalty: f32,
    #[serde(default)]
    pub frequency_penalty: f32,
    pub seed: u64,
}

fn one() -> f32 {
    1.0
}

/// The comparisons memra gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Level A (a): requests admitted at staggered steps into the continuous batch vs each alone.
    BatchedVsSolo,
    /// Level A (b): prefill in chunks of each size vs token-by-token decode.
    ChunkedPrefill,
    /// Level A (c): full and partial prefix-cache hits vs cold runs.
    PrefixCache,
    /// Level A (d): n choices of one request vs separate requests with the derived sequences.
    NChoices,
    /// Level A (e): seeded sampling in a batch of other requests vs alone.
    SeededBatch,
    /// Level B: HF transformers parity on committed reference data.
    HfParity,
    /// Level B: tokenizer ids on the committed corpus.
    TokenizerParity,
    /// Level B: the lane's backend (CUDA) against the CPU reference backend, greedy.
    BackendParity,
    /// Streams from a running `memra serve`, one at a time vs all at once, byte-compared.
    Serving,
    /// Level A (f): speculative decoding (each drafter, each K, greedy and seeded, in a batch
    /// with plain requests) vs plain decode.
    Speculative,
}

/// Comparison levels (DESIGN.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Logits bit-identical at every generated position (and so token ids too).
    LogitBits,
    /// Streamed text and logprobs byte-identical.
    TextBytes,
    /// Token ids identical.
    TokenIds,
    /// Greedy token identity and max |Δlogit| over the top-20 within `bound`.
    Tolerance,
}

/// Deliberately broken arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Canary {
    /// Matmul reduction split chosen by the number of rows in the pass.
    ShapeDependentSplit,
    /// One stateful random generator shared by all sequences.
    SharedRng,
    /// Forked choices write into a shared block without copying it.
    NoCopyOnWrite,
    /// A prefix-cache hit's block table is off by one block.
    PrefixOffByOne,
    /// RoPE base halved (a wrong config mapping).
    PerturbedRopeBase,
    /// The GGUF pre-tokenizer ignored (GPT-2 regex for BPE, flipped space prefix for SentencePiece).
    WrongPreTokenizer,
    /// Speculative verify accepts drafts by a probability threshold instead of equality.
    AcceptByThreshold,
    /// CUDA graphs replayed without refilling their inputs (a stale position and token).
    StaleGraphInputs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    gate: Vec<GateSpec>,
}

/// Reads every `*.toml` in `dir`, in file-name order. Errors name the file.
pub fn load_dir(dir: &Path) -> Result<Vec<GateSpec>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut gates = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("{}", f.display()))?;
        let parsed: File =
            toml::from_str(&text).with_context(|| format!("{}: invalid gate file", f.display()))?;
        gates.extend(parsed.gate);
    }
    let mut names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!("gate name {:?} is defined twice", w[0]);
    }
    Ok(gates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_gates_parse_and_cover_every_kind() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates");
        let gates = load_dir(&dir).unwrap();
        for kind in [
            Kind::BatchedVsSolo,
            Kind::ChunkedPrefill,
            Kind::PrefixCache,
            Kind::NChoices,
            Kind::SeededBatch,
            Kind::HfParity,
            Kind::TokenizerParity,
            Kind::BackendParity,
            Kind::Serving,
            Kind::Speculative,
        ] {
            assert!(gates.iter().any(|g| g.kind == kind), "{kind:?}");
        }
        for m in [
            "smollm2-135m-instruct",
            "gemma-3-270m",
            "qwen2.5-coder-0.5b-instruct",
            "qwen3-random",
        ] {
            assert!(
                gates
                    .iter()
                    .any(|g| g.model == m && g.kind == Kind::BatchedVsSolo),
                "{m}"
            );
        }
    }

    #[test]
    fn duplicate_names_and_unknown_fields_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let gate = "[[gate]]\nname = \"a\"\nkind = \"chunked_prefill\"\nmodel = \"m\"\nlevel = \"logit_bits\"\ncanary = \"shape_dependent_split\"\n";
        std::fs::write(dir.path().join("x.toml"), format!("{gate}{gate}")).unwrap();
        assert!(load_dir(dir.path())
            .unwrap_err()
            .to_string()
            .contains("defined twice"));
        std::fs::write(dir.path().join("x.toml"), format!("{gate}colour = 1\n")).unwrap();
        let e = format!("{:#}", load_dir(dir.path()).unwrap_err());
        assert!(e.contains("colour"), "{e}");
    }
}
