//! The backend interface: one forward pass over a batch of sequence chunks against a paged KV
//! cache the backend owns. The CPU backend is the reference; the CUDA backend implements the same
//! trait. Block bookkeeping ([`crate::kv::BlockManager`]) stays outside the backend.

pub mod cpu;
pub mod cuda;

use crate::error::{Error, Result};
use crate::sample::SamplingParams;

/// Which logits a sequence wants back from a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsWanted {
    /// None (a prefill chunk that does not end the prompt).
    None,
    /// Only the last token's row.
    Last,
    /// Every token's row (speculative verify, prompt logprobs).
    All,
}

/// One sequence's part of a step: `tokens` at positions `start_pos ..`, whose K/V go into the
/// blocks of `block_table` (which must already cover `start_pos + tokens.len()` positions).
#[derive(Debug, Clone)]
pub struct SeqChunk<'a> {
    pub tokens: &'a [u32],
    pub start_pos: usize,
    pub block_table: &'a [u32],
    pub logits: LogitsWanted,
}

/// Checks a step's chunks before a backend runs them: every block table covers its chunk and
/// names blocks below `num_blocks`, and every token id is below `vocab`. Errors:
/// [`crate::Error::InvalidArgument`] naming the problem.
pub fn check_batch(
    batch: &[SeqChunk<'_>],
    block_size: usize,
    num_blocks: usize,
    vocab: usize,
) -> Result<()> {
    for ch in batch {
        let end = ch.start_pos + ch.tokens.len();
        if ch.block_table.len() * block_size < end {
            return Err(Error::InvalidArgument(format!(
                "block table covers {} positions, chunk ends at {end}",
                ch.block_table.len() * block_size
            )));
        }
        if let Some(&b) = ch.block_table.iter().find(|&&b| b as usize >= num_blocks) {
            return Err(Error::InvalidArgument(format!(
                "block {b} is outside the KV cache ({num_blocks} blocks)"
            )));
        }
        if let Some(&tok) = ch.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {tok} is outside the vocabulary ({vocab})"
            )));
        }
    }
    Ok(())
}

/// One token to choose from a row of a step's logits ([`Backend::forward_pick`]).
#[derive(Debug, Clone)]
pub struct Pick<'a> {
    /// Index into the step's wanted logits rows, in the order [`Backend::forward`] returns them.
    /// Several picks may share a row (the `n` choices of one prompt).
    pub row: usize,
    pub params: &'a SamplingParams,
    /// Penalty context: the prompt, the tokens generated so far, and `extra` tokens after them
    /// (the drafts before this row in a speculative verify).
    pub prompt: &'a [u32],
    pub output: &'a [u32],
    pub extra: &'a [u32],
    /// Keys of the random draw (DESIGN.md §2): the choice index and the position being chosen.
    pub sequence: u32,
    pub position: u64,
    /// `Some(k)`: also the chosen token's logprob and the `k` (≤ 20) most likely alternatives.
    pub logprobs: Option<usize>,
    /// Also return the raw logits row (`vocab_size` f32), for gates and canaries.
    pub want_logits: bool,
}

/// What a [`Pick`] chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub token: u32,
    /// The token's logprob and the top alternatives (id, logprob), most likely first, from the
    /// logits after penalties and bias.
    pub logprob: Option<(f32, Vec<(u32, f32)>)>,
    /// The raw logits row, when asked for.
    pub logits: Option<Vec<f32>>,
}

/// The most alternatives a pick may ask logprobs for (the OpenAI API's `top_logprobs` limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The engine's view of a compute device.
pub trait Backend: Send {
    /// "cpu" or "cuda".
    fn name(&self) -> &'static str;
    /// Positions per KV block.
    fn block_size(&self) -> usize;
    /// KV blocks the backend allocated.
    fn num_blocks(&self) -> usize;
    /// Vocabulary size (logits row length).
    fn vocab_size(&self) -> usize;
    /// Decoder layers of the model (0 when unknown). The speculation policy prices a layer-skip
    /// draft token as its share of them.
    fn n_layers(&self) -> usize {
        0
    }
    /// Bytes of weights one decode step reads (0 when unknown). The speculation policy prices a
    /// draft model's token as its bytes over the target's.
    fn weight_bytes(&self) -> usize {
        0
    }
    /// Runs one forward over every chunk of `batch` (all rows in one pass), writes each token's K/V
    /// into its block table, and returns the wanted logits rows (`vocab_size` f32 each) in batch
    /// order. The contract: a row's logits are bit-identical whatever else is in the batch and
    /// however the sequence's tokens were split into chunks (DESIGN.md §3, Level A).
    fn forward(&mut self, batch: &[SeqChunk<'_>]) -> Result<Vec<Vec<f32>>> {
        self.forward_layers(batch, usize::MAX)
    }
    /// [`Backend::forward`] through only the first `n_layers` decoder layers, then the final norm
    /// and LM head (layer-skip self-drafting, Elhoushi et al. 2024 "LayerSkip"). Writes K/V for
    /// those layers only; a later full forward over the same positions overwrites them.
    fn forward_layers(&mut self, batch: &[SeqChunk<'_>], n_layers: usize) -> Result<Vec<Vec<f32>>>;
    /// [`Backend::forward`], then one token per pick, chosen exactly as
    /// [`crate::sample::pick`] chooses it on the host (the CUDA backend chooses on the device
    /// and downloads only tokens, logprobs and the rows asked for). Returns one [`Picked`] per
    /// pick, in order. Errors: those of `forward`, or a pick naming a row the step did not
    /// produce ([`Error::InvalidArgument`]).
    fn forward_pick(&mut self, batch: &[SeqChunk<'_>], picks: &[Pick<'_>]) -> Result<Vec<Picked>> {
        let rows = self.forward(batch)?;
        picks
            .iter()
            .map(|pk| match rows.get(pk.row) {
                Some(r) => Ok(crate::sample::pick(r, pk)),
                None => Err(Error::InvalidArgument(format!(
                    "pick of logits row {} in a step with {} rows",
                    pk.row,
                    rows.len()
                ))),
            })
            .collect()
    }
    /// Copies block `src`'s K/V into block `dst` (copy-on-write of a shared block).
    fn copy_block(&mut self, src: u32, dst: u32);
}
