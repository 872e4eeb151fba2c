//! The [`Drafter`] interface and the model-based drafters. A drafter proposes tokens for all of a
//! scheduler step's speculating sequences at once, so model drafters batch their forwards across
//! sequences. Drafts only decide how many positions one verify covers; acceptance compares them
//! with the target's own choices, so no drafter can change output.

use super::NgramDrafter;
use crate::backend::{Backend, LogitsWanted, SeqChunk};
use crate::error::Result;
use crate::kv::{BlockManager, BlockTable};
use crate::sample;

/// What a drafter keeps per sequence between steps: a draft model's KV (its block table in the
/// drafter's own pool) and how many positions of it are valid.
#[derive(Debug, Clone, Default)]
pub struct DraftState {
    pub table: BlockTable,
    pub computed: usize,
}

/// One sequence's drafting job in a step.
pub struct DraftJob<'a> {
    /// Prompt plus generated tokens; the last one is fed to the target this step, at position
    /// `tokens.len() - 1`, followed by the drafts.
    pub tokens: &'a [u32],
    /// Most tokens to propose.
    pub k: usize,
    /// The target's block table for the sequence, covering `tokens.len() + k` positions.
    pub target_table: &'a [u32],
    pub state: &'a mut DraftState,
    /// The proposal, filled by the drafter (may be shorter than `k`, or empty).
    pub draft: Vec<u32>,
}

/// Proposes draft tokens for speculative decoding (Leviathan et al. 2023; Chen et al. 2023).
/// Implementations: [`NgramDrafter`] (prompt lookup), [`LayerSkipDrafter`] (the target's first
/// layers), [`DraftModelDrafter`] (a smaller model sharing the tokenizer). Multi-token-prediction
/// heads plug in here too.
pub trait Drafter: Send {
    /// Fills `job.draft` for every job. `target` is the target model's backend (layer-skip drafts
    /// through its first layers; what it writes at draft positions the verify overwrites).
    /// Errors: a failed forward (the step fails).
    fn draft(&mut self, target: &mut dyn Backend, jobs: &mut [DraftJob<'_>]) -> Result<()>;
    /// The sequence's verified length is now `valid` positions: drop draft state past it.
    fn rollback(&mut self, _state: &mut DraftState, _valid: usize) {}
    /// The sequence finished or was preempted: free its draft state.
    fn release(&mut self, _state: &mut DraftState) {}
}

impl Drafter for NgramDrafter {
    fn draft(&mut self, _target: &mut dyn Backend, jobs: &mut [DraftJob<'_>]) -> Result<()> {
        for j in jobs {
            j.draft = self.propose(j.tokens, j.k);
        }
        Ok(())
    }
}

/// Self-drafting with the target's first `layers` decoder layers, final norm and LM head,
/// greedy (LayerSkip, Elhoushi et al. 2024): `k` rounds of one-token partial forwards, all
/// sequences of a round in one forward.
pub struct LayerSkipDrafter {
    pub layers: usize,
}

impl Drafter for LayerSkipDrafter {
    fn draft(&mut self, target: &mut dyn Backend, jobs: &mut [DraftJob<'_>]) -> Result<()> {
        let rounds = jobs.iter().map(|j| j.k).max().unwrap_or(0);
        for round in 0..rounds {
            let active: Vec<usize> = (0..jobs.len())
                .filter(|&j| jobs[j].draft.len() == round && round < jobs[j].k)
                .collect();
            if active.is_empty() {
                break;
            }
            let toks: Vec<[u32; 1]> = active
                .iter()
                .map(|&j| {
                    let jb = &jobs[j];
                    [if round == 0 {
                        *jb.tokens.last().expect("a sequence has tokens")
                    } else {
                        jb.draft[round - 1]
                    }]
                })
                .collect();
            let chunks: Vec<SeqChunk<'_>> = active
                .iter()
                .zip(&toks)
                .map(|(&j, t)| SeqChunk {
                    tokens: t,
                    start_pos: jobs[j].tokens.len() - 1 + round,
                    block_table: jobs[j].target_table,
                    logits: LogitsWanted::Last,
                })
                .collect();
            let rows = target.forward_layers(&chunks, self.layers)?;
            drop(chunks);
            for (&j, row) in active.iter().zip(rows) {
                jobs[j].draft.push(sample::argmax(&row));
            }
        }
        Ok(())
    }
}

/// A draft model sharing the target's tokenizer, with its own backend and KV pool: round 0
/// catches its KV up with everything it has not seen (through the last token), then `k - 1`
/// one-token rounds; greedy. A sequence whose draft blocks run out gets no draft (plain decode).
pub struct DraftModelDrafter {
    pub backend: Box<dyn Backend>,
    pub bm: BlockManager,
}

impl DraftModelDrafter {
    /// A drafter over `backend` with a block manager for all its KV blocks.
    pub fn new(backend: Box<dyn Backend>) -> DraftModelDrafter {
        DraftModelDrafter {
            bm: BlockManager::new(backend.num_blocks(), backend.block_size()),
            backend,
        }
    }
}

impl Drafter for DraftModelDrafter {
    fn draft(&mut self, _target: &mut dyn Backend, jobs: &mut [DraftJob<'_>]) -> Result<()> {
        let mut active = Vec::new();
        for (j, jb) in jobs.iter_mut().enumerate() {
            let end = jb.tokens.len() + jb.k;
            if self.bm.reserve(&mut jb.state.table, end).is_ok() {
                active.push(j);
            }
        }
        let rounds = jobs.iter().map(|j| j.k).max().unwrap_or(0);
        for round in 0..rounds {
            let group: Vec<usize> = active
                .iter()
                .copied()
                .filter(|&j| jobs[j].draft.len() == round && round < jobs[j].k)
                .collect();
            if group.is_empty() {
                break;
            }
            let feeds: Vec<(Vec<u32>, usize)> = group
                .iter()
                .map(|&j| {
                    let jb = &jobs[j];
                    if round == 0 {
                        (jb.tokens[jb.state.computed..].to_vec(), jb.state.computed)
                    } else {
                        (vec![jb.draft[round - 1]], jb.tokens.len() - 1 + round)
                    }
                })
                .collect();
            let chunks: Vec<SeqChunk<'_>> = group
                .iter()
                .zip(&feeds)
                .map(|(&j, (t, start))| SeqChunk {
                    tokens: t,
                    start_pos: *start,
                    block_table: &jobs[j].state.table.blocks,
                    logits: LogitsWanted::Last,
                })
                .collect();
            let rows = self.backend.forward(&chunks)?;
            drop(chunks);
            for ((&j, row), (t, start)) in group.iter().zip(rows).zip(&feeds) {
                jobs[j].draft.push(sample::argmax(&row));
                jobs[j].state.computed = start + t.len();
            }
        }
        Ok(())
    }

    fn rollback(&mut self, state: &mut DraftState, valid: usize) {
        state.computed = state.computed.min(valid);
        self.bm.truncate(&mut state.table, state.computed);
    }

    fn release(&mut self, state: &mut DraftState) {
        self.bm.free_table(&mut state.table);
        state.computed = 0;
    }
}
