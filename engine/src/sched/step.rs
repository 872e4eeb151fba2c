//! One scheduler step: admission, planning within the token budget (decode rows, speculative
//! verify rows, prefill chunks), drafting, one backend forward, then sampling and speculative
//! acceptance.

use super::Core;
use crate::backend::{LogitsWanted, SeqChunk};
use crate::error::Result;
use crate::sample;
use crate::spec::{Drafter, NgramDrafter, SpecMethod};

/// One sequence's part of the step.
struct Planned {
    key: u64,
    /// Tokens fed: a prefill chunk, one decode token, or the last token plus the drafts.
    feed: Vec<u32>,
    start: usize,
    /// Draft tokens in `feed` (after its first token); empty = no speculation this step.
    draft: Vec<u32>,
    /// Draft budget when the sequence speculates this step.
    spec_k: usize,
    layer_skip: Option<usize>,
    /// Drafts come from the draft model.
    draft_model: bool,
}

impl Core {
    /// Draft tokens sequence `i` may verify this step: 0 when it does not speculate (no spec
    /// request, still in prefill, too many sequences running, a paused low-acceptance streak).
    fn spec_budget(&mut self, i: usize, budget: usize) -> (usize, Option<SpecMethod>) {
        let s = &self.running[i];
        let Some(spec) = self.reqs.get(&s.req).and_then(|r| r.s.spec) else {
            return (0, None);
        };
        if s.tokens.len() - s.computed != 1 || self.running.len() > self.cfg.spec_max_running {
            return (0, None);
        }
        if s.accept_rate < self.cfg.spec_min_acceptance && s.spec_pause > 0 {
            self.running[i].spec_pause -= 1;
            return (0, None);
        }
        let room = self.cfg.max_context.saturating_sub(s.tokens.len() + 1);
        (
            spec.k.min(budget.saturating_sub(1)).min(room),
            Some(spec.method),
        )
    }

    pub(super) fn step(&mut self) -> Result<()> {
        self.admit();
        // Forked choices sample from the prompt's logits first.
        let mut i = 0;
        while i < self.running.len() {
            if let Some(l) = self.running[i].pending.take() {
                if self.sample_into(i, &l, None).is_none() {
                    continue;
                }
            }
            i += 1;
        }
        let plan = self.plan()?;
        if plan.is_empty() {
            return Ok(());
        }
        let idx: Vec<usize> = plan.iter().map(|p| self.position(p.key)).collect();
        let chunks: Vec<SeqChunk<'_>> = idx
            .iter()
            .zip(&plan)
            .map(|(&i, p)| {
                let s = &self.running[i];
                SeqChunk {
                    tokens: &p.feed,
                    start_pos: p.start,
                    block_table: &s.table.blocks,
                    logits: if !p.draft.is_empty() {
                        LogitsWanted::All
                    } else if p.start + p.feed.len() == s.tokens.len() {
                        LogitsWanted::Last
                    } else {
                        LogitsWanted::None
                    },
                }
            })
            .collect();
        let wanted: Vec<usize> = chunks
            .iter()
            .map(|c| match c.logits {
                LogitsWanted::None => 0,
                LogitsWanted::Last => 1,
                LogitsWanted::All => c.tokens.len(),
            })
            .collect();
        let mut rows = self.backend.forward(&chunks)?.into_iter();
        drop(chunks);
        let mut sampled = Vec::new();
        let mut verify = Vec::new();
        for ((&i, p), n_rows) in idx.iter().zip(plan).zip(wanted) {
            let r: Vec<Vec<f32>> = rows.by_ref().take(n_rows).collect();
            if p.draft.is_empty() {
                self.running[i].computed += p.feed.len();
                self.index_full_blocks(i);
                if let Some(row) = r.into_iter().next() {
                    sampled.push((p.key, row));
                }
            } else {
                verify.push((p.key, p.draft, r));
            }
        }
        for (key, logits) in sampled {
            let Some(i) = self.running.iter().position(|s| s.order == key) else {
                continue;
            };
            self.fork_choices(i, &logits);
            self.sample_into(i, &logits, None);
        }
        for (key, draft, rows) in verify {
            self.accept(key, &draft, &rows);
        }
        Ok(())
    }

    fn position(&self, key: u64) -> usize {
        self.running
            .iter()
            .position(|s| s.order == key)
            .expect("planned sequences are running")
    }

    /// Decode rows first (with their drafts), then prefill chunks, within the token budget.
    fn plan(&mut self) -> Result<Vec<Planned>> {
        let mut budget = self.cfg.max_batch_tokens;
        let mut order: Vec<usize> = (0..self.running.len()).collect();
        order.sort_by_key(|&i| {
            let s = &self.running[i];
            (s.tokens.len() - s.computed > 1, s.order)
        });
        let keys: Vec<u64> = order.iter().map(|&i| self.running[i].order).collect();
        let mut plan = Vec::new();
        for key in keys {
            if budget == 0 {
                break;
            }
            let Some(i) = self.running.iter().position(|s| s.order == key) else {
                continue;
            };
            let (mut spec_k, method) = self.spec_budget(i, budget);
            if method == Some(SpecMethod::DraftModel) && self.draft.is_none() {
                spec_k = 0; // no draft model loaded: plain decode (the server validates requests)
            }
            let s = &self.running[i];
            let mut draft = Vec::new();
            let mut layer_skip = None;
            match method {
                Some(SpecMethod::Ngram { max_n }) if spec_k > 0 => {
                    draft = NgramDrafter { max_n }.propose(&s.tokens, spec_k);
                }
                Some(SpecMethod::LayerSkip { layers }) if spec_k > 0 => layer_skip = Some(layers),
                _ => {}
            }
            let draft_model = method == Some(SpecMethod::DraftModel) && spec_k > 0;
            let n = if layer_skip.is_some() || draft_model {
                1 + spec_k
            } else {
                (s.tokens.len() - s.computed).min(budget).max(1) + draft.len()
            };
            if self.reserve(i, n) {
                budget -= n;
                let s = &self.running[i];
                let model_drafted = layer_skip.is_some() || draft_model;
                let plain = n - draft.len() - if model_drafted { spec_k } else { 0 };
                plan.push(Planned {
                    key,
                    feed: s.tokens[s.computed..s.computed + plain]
                        .iter()
                        .chain(&draft)
                        .copied()
                        .collect(),
                    start: s.computed,
                    draft,
                    spec_k,
                    layer_skip,
                    draft_model,
                });
            }
        }
        plan.retain(|p| self.running.iter().any(|s| s.order == p.key));
        self.draft_layer_skip(&mut plan)?;
        self.draft_with_model(&mut plan)?;
        Ok(plan)
    }

    /// Layer-skip drafting: `k` rounds of one-token forwards through the first L layers, greedy.
    /// The partial K/V it writes at the draft positions is overwritten by the verify forward.
    fn draft_layer_skip(&mut self, plan: &mut [Planned]) -> Result<()> {
        let rounds = plan
            .iter()
            .filter(|p| p.layer_skip.is_some())
            .map(|p| p.spec_k)
            .max()
            .unwrap_or(0);
        for round in 0..rounds {
            let active: Vec<usize> = (0..plan.len())
                .filter(|&j| {
                    plan[j].layer_skip.is_some()
                        && plan[j].draft.len() == round
                        && round < plan[j].spec_k
                })
                .collect();
            if active.is_empty() {
                break;
            }
            // Group by layer count (one partial forward per distinct L).
            let mut layer_counts: Vec<usize> = active
                .iter()
                .map(|&j| plan[j].layer_skip.expect("set"))
                .collect();
            layer_counts.sort_unstable();
            layer_counts.dedup();
            for l in layer_counts {
                let group: Vec<usize> = active
                    .iter()
                    .copied()
                    .filter(|&j| plan[j].layer_skip == Some(l))
                    .collect();
                let feeds: Vec<(u32, usize, usize)> = group
                    .iter()
                    .map(|&j| {
                        let p = &plan[j];
                        let tok = if round == 0 {
                            p.feed[0]
                        } else {
                            p.draft[round - 1]
                        };
                        (tok, p.start + round, self.position(p.key))
                    })
                    .collect();
                let toks: Vec<[u32; 1]> = feeds.iter().map(|f| [f.0]).collect();
                let chunks: Vec<SeqChunk<'_>> = feeds
                    .iter()
                    .zip(&toks)
                    .map(|(f, t)| SeqChunk {
                        tokens: t,
                        start_pos: f.1,
                        block_table: &self.running[f.2].table.blocks,
                        logits: LogitsWanted::Last,
                    })
                    .collect();
                let rows = self.backend.forward_layers(&chunks, l)?;
                drop(chunks);
                for (&j, row) in group.iter().zip(rows) {
                    plan[j].draft.push(sample::argmax(&row));
                }
            }
        }
        for p in plan.iter_mut().filter(|p| p.layer_skip.is_some()) {
            p.feed.truncate(1);
            p.feed.extend_from_slice(&p.draft);
        }
        Ok(())
    }

    /// Draft-model drafting: catch the draft model's KV up to the sequence (its own block pool),
    /// then `k` greedy one-token steps. A sequence whose draft blocks run out decodes plainly.
    fn draft_with_model(&mut self, plan: &mut [Planned]) -> Result<()> {
        let Some(mut dm) = self.draft.take() else {
            return Ok(());
        };
        let result = (|| -> Result<()> {
            let mut active: Vec<usize> = Vec::new();
            for (j, p) in plan.iter().enumerate().filter(|(_, p)| p.draft_model) {
                let i = self.position(p.key);
                let s = &mut self.running[i];
                let end = s.tokens.len() + p.spec_k;
                if dm.bm.reserve(&mut s.draft_table, end).is_ok() {
                    active.push(j);
                }
            }
            for round in 0..plan.iter().map(|p| p.spec_k).max().unwrap_or(0) {
                let group: Vec<usize> = active
                    .iter()
                    .copied()
                    .filter(|&j| plan[j].draft.len() == round && round < plan[j].spec_k)
                    .collect();
                if group.is_empty() {
                    break;
                }
                // Round 0 feeds everything the draft model has not seen (through the last
                // token); later rounds feed the previous draft token.
                let feeds: Vec<(Vec<u32>, usize, usize)> = group
                    .iter()
                    .map(|&j| {
                        let p = &plan[j];
                        let i = self.position(p.key);
                        let s = &self.running[i];
                        if round == 0 {
                            (s.tokens[s.draft_computed..].to_vec(), s.draft_computed, i)
                        } else {
                            (vec![p.draft[round - 1]], s.tokens.len() - 1 + round, i)
                        }
                    })
                    .collect();
                let chunks: Vec<SeqChunk<'_>> = feeds
                    .iter()
                    .map(|(t, start, i)| SeqChunk {
                        tokens: t,
                        start_pos: *start,
                        block_table: &self.running[*i].draft_table.blocks,
                        logits: LogitsWanted::Last,
                    })
                    .collect();
                let rows = dm.backend.forward(&chunks)?;
                drop(chunks);
                for ((&j, row), (t, start, i)) in group.iter().zip(rows).zip(&feeds) {
                    plan[j].draft.push(sample::argmax(&row));
                    self.running[*i].draft_computed = start + t.len();
                }
            }
            for p in plan.iter_mut().filter(|p| p.draft_model) {
                p.feed.truncate(1);
                p.feed.extend_from_slice(&p.draft);
            }
            Ok(())
        })();
        self.draft = Some(dm);
        result
    }

    /// Speculative acceptance: walk the verify rows, choosing each position's token exactly as
    /// plain decode would; keep going while it equals the draft. The K/V of rejected drafts is
    /// dropped by truncating the block table.
    fn accept(&mut self, key: u64, draft: &[u32], rows: &[Vec<f32>]) {
        let Some(i) = self.running.iter().position(|s| s.order == key) else {
            return;
        };
        // The verify chunk wrote the last token and the drafts; only accepted ones stay valid.
        let mut accepted = 0;
        for (j, row) in rows.iter().enumerate() {
            let d = draft.get(j).copied();
            match self.sample_into(i, row, d) {
                None => break,
                Some(t) if Some(t) == d => accepted += 1,
                Some(_) => break,
            }
        }
        self.counters.spec_drafted += draft.len() as u64;
        self.counters.spec_accepted += accepted as u64;
        if self.counters.spec_accepted_at.len() < draft.len() {
            self.counters.spec_accepted_at.resize(draft.len(), 0);
        }
        for a in &mut self.counters.spec_accepted_at[..accepted] {
            *a += 1;
        }
        let Some(i) = self.running.iter().position(|s| s.order == key) else {
            return;
        };
        let s = &mut self.running[i];
        s.computed = s.tokens.len() - 1;
        s.drafted += draft.len() as u32;
        s.accepted += accepted as u32;
        let rate = if draft.is_empty() {
            0.0
        } else {
            accepted as f32 / draft.len() as f32
        };
        s.accept_rate = 0.7 * s.accept_rate + 0.3 * rate;
        if s.accept_rate < self.cfg.spec_min_acceptance {
            s.spec_pause = 16;
        }
        let computed = s.computed;
        // The draft model's KV stays valid up to the last accepted draft token.
        s.draft_computed = s.draft_computed.min(computed);
        let draft_computed = s.draft_computed;
        if let Some(dm) = self.draft.as_mut() {
            dm.bm
                .truncate(&mut self.running[i].draft_table, draft_computed);
        }
        self.bm.truncate(&mut self.running[i].table, computed);
        self.index_full_blocks(i);
    }
}
