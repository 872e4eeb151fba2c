//! Token choice on the device (`kernels/sample.cu`): the host packs each [`Pick`]'s parameters
//! and its penalty/bias edits ([`crate::sample::edits`], the same list the CPU applies), one
//! block per pick chooses the token exactly as [`crate::sample::pick`] does, and only tokens,
//! logprobs and the rows a pick asks for come back.

use super::CudaDevice;
use crate::backend::{Pick, Picked, MAX_TOP_LOGPROBS};
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Picks one launch handles (its scratch is sized for them); more run as further launches.
pub const PICKS_PER_LAUNCH: usize = 32;
const PICK_WORDS: usize = 16;
const EDIT_WORDS: usize = 5;
const OUT_WORDS: usize = 2 + 2 * MAX_TOP_LOGPROBS;
const THREADS: u32 = 1024;

/// Device scratch of the sampling kernel: per pick slot, the edited row (`vocab` f32) and three
/// key lists (`3 × vocab` u64).
pub struct SampleScratch {
    proc: CudaSlice<f32>,
    lists: CudaSlice<u64>,
}

impl SampleScratch {
    /// Bytes the scratch takes for a `vocab`-sized logits row.
    pub fn bytes(vocab: usize) -> usize {
        PICKS_PER_LAUNCH * vocab * (4 + 3 * 8)
    }

    /// Allocates it. Errors: out of device memory (naming the size).
    pub fn new(dev: &CudaDevice, vocab: usize) -> Result<SampleScratch> {
        Ok(SampleScratch {
            proc: dev.alloc::<f32>(PICKS_PER_LAUNCH * vocab)?,
            lists: dev.alloc::<u64>(PICKS_PER_LAUNCH * 3 * vocab)?,
        })
    }
}

/// The kernel's parameter words for `picks`, and the flat edit list.
fn pack(picks: &[Pick<'_>], n_rows: usize) -> Result<(Vec<u32>, Vec<u32>)> {
    let mut words = Vec::with_capacity(picks.len() * PICK_WORDS);
    let mut edits = Vec::new();
    for pk in picks {
        if pk.row >= n_rows {
            return Err(Error::InvalidArgument(format!(
                "pick of logits row {} in a step with {n_rows} rows",
                pk.row
            )));
        }
        let ed = crate::sample::edits(pk.params, pk.prompt, pk.output, pk.extra);
        let off = edits.len() / EDIT_WORDS;
        for e in &ed {
            let flags = e.rep.is_some() as u32
                | (e.sub.is_some() as u32) << 1
                | (e.bias.is_some() as u32) << 2;
            edits.extend([
                e.id,
                flags,
                e.rep.unwrap_or(1.0).to_bits(),
                e.sub.unwrap_or(0.0).to_bits(),
                e.bias.unwrap_or(0.0).to_bits(),
            ]);
        }
        let p = pk.params;
        words.extend([
            pk.row as u32,
            off as u32,
            ed.len() as u32,
            p.temperature.to_bits(),
            p.top_k.min(u32::MAX as usize) as u32,
            p.top_p.to_bits(),
            p.min_p.to_bits(),
            p.seed as u32,
            (p.seed >> 32) as u32,
            pk.sequence,
            pk.position as u32,
            (pk.position >> 32) as u32,
            pk.logprobs.unwrap_or(0).min(MAX_TOP_LOGPROBS) as u32,
            pk.logprobs.is_some() as u32,
            0,
            0,
        ]);
    }
    if edits.is_empty() {
        edits.resize(EDIT_WORDS, 0);
    }
    Ok((words, edits))
}

impl CudaDevice {
    /// Chooses a token for every pick from the first `rows` rows of `logits` (`[n_rows, vocab]`
    /// f32 on the device; rows past `rows`, such as a graphed step's padding, are not the
    /// step's), as [`crate::sample::pick`] would on the host. `scratch` must have been made for
    /// `vocab`. Errors: a pick naming a row at or past `rows` (or outside `logits`), a launch or
    /// copy failure.
    pub fn sample_picks(
        &self,
        logits: &CudaSlice<f32>,
        vocab: usize,
        rows: usize,
        picks: &[Pick<'_>],
        scratch: &mut SampleScratch,
    ) -> Result<Vec<Picked>> {
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        let n_rows = rows.min(logits.len() / vocab.max(1));
        let (words, edits) = pack(picks, n_rows)?;
        let words = self.upload(&words)?;
        let edits = self.upload(&edits)?;
        let mut out = self.alloc::<u32>(picks.len() * OUT_WORDS)?;
        let f = self.function("sample.cu", "sample_picks")?;
        // Sort keys hold a token id in 24 bits.
        let v = i32::try_from(vocab)
            .ok()
            .filter(|&v| v <= 0xFF_FFFF)
            .ok_or_else(|| Error::Unsupported(format!("sampling over {vocab} tokens (> 2^24)")))?;
        for start in (0..picks.len()).step_by(PICKS_PER_LAUNCH) {
            let n = PICKS_PER_LAUNCH.min(picks.len() - start);
            let w = words.slice(start * PICK_WORDS..(start + n) * PICK_WORDS);
            let o = out.slice_mut(start * OUT_WORDS..(start + n) * OUT_WORDS);
            let cfg = LaunchConfig {
                grid_dim: (n as u32, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.launcher(&f);
            b.arg(logits)
                .arg(&w)
                .arg(&edits)
                .arg(&scratch.proc)
                .arg(&scratch.lists)
                .arg(&o)
                .arg(&v);
            // SAFETY: signature matches; rows were checked against `logits`, edit offsets and
            // lengths come from `pack`, and the scratch holds PICKS_PER_LAUNCH slots of `vocab`.
            unsafe { b.launch(cfg) }?;
        }
        let host = self.download(&out)?;
        let rows = if picks.iter().any(|p| p.want_logits) {
            Some(self.download(logits)?)
        } else {
            None
        };
        Ok(picks
            .iter()
            .zip(host.chunks(OUT_WORDS))
            .map(|(pk, o)| {
                let logprob = pk.logprobs.map(|k| {
                    let k = k.min(MAX_TOP_LOGPROBS);
                    let top = (0..k)
                        .filter(|&x| o[2 + x] != u32::MAX)
                        .map(|x| (o[2 + x], f32::from_bits(o[2 + MAX_TOP_LOGPROBS + x])))
                        .collect();
                    (f32::from_bits(o[1]), top)
                });
                Picked {
                    token: o[0],
                    logprob,
                    logits: pk
                        .want_logits
                        .then(|| rows.as_ref().map(|r| r[pk.row * vocab..][..vocab].to_vec()))
                        .flatten(),
                }
            })
            .collect())
    }
}
