//! One scheduler step: admission, planning within the token budget (decode rows, speculative
//! verify rows, prefill chunks), drafting, one backend forward, then sampling and speculative
//! acceptance.

use super::{Core, Seq};
use crate::backend::{LogitsWanted, Pick, Picked, SeqChunk};
use crate::error::Result;
use crate::spec::{DraftJob, Drafter, LayerSkipDrafter, NgramDrafter, SpecMethod};

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
    /// How it drafts, when it speculates this step.
    method: Option<SpecMethod>,
}

impl Core {
    /// Draft tokens sequence `i` may verify this step: 0 when it does not speculate (no spec
    /// request, still in prefill, too many sequences running, a policy drafter that cannot pay,
    /// a paused low-acceptance streak).
    fn spec_budget(&mut self, i: usize, budget: usize) -> (usize, Option<SpecMethod>) {
        let s = &self.running[i];
        let Some(spec) = self.reqs.get(&s.req).and_then(|r| r.s.spec) else {
            return (0, None);
        };
        if s.tokens.len() - s.computed != 1 || self.running.len() > self.cfg.spec_max_running {
            return (0, None);
        }
        // The step that ends choice 0's prompt also starts the other choices (`fork_choices`),
        // which only a plain row does.
        if s.choice == 0 && s.tokens.len() == s.prompt_len && self.reqs[&s.req].s.n > 1 {
            return (0, None);
        }
        let floor = match s.spec_floor {
            Some(f) => f,
            None => {
                let f = self.spec_floor(spec);
                self.running[i].spec_floor = Some(f);
                f
            }
        };
        let s = &self.running[i];
        // A policy choice whose drafter cannot pay at any acceptance stays plain.
        if floor >= 1.0 {
            return (0, None);
        }
        if s.acceptance() < floor && s.spec_pause > 0 {
            self.running[i].spec_pause -= 1;
            return (0, None);
        }
        let room = self.cfg.max_context.saturating_sub(s.tokens.len() + 1);
        let k = crate::spec::draft_len(
            s.acceptance(),
            self.cfg.spec_verify_base,
            self.cfg.spec_row_cost,
            self.draft_cost(spec.method),
            spec.k,
        );
        (k.min(budget.saturating_sub(1)).min(room), Some(spec.method))
    }

    /// The per-token acceptance under which a sequence with `spec` pauses speculation:
    /// `spec_min_acceptance` for an explicit request (the request's choice wins over the cost
    /// model); for the server's default, the larger of that and the break-even acceptance of
    /// this drafter at the request's k, its drafting cost counted with the verify rows
    /// ([`crate::spec::break_even_acceptance`]); 1.0 (never pays) makes the sequence decode
    /// plainly. With `spec_row_cost` ≤ 0 the cost model is off and the floor is
    /// `spec_min_acceptance` either way. Only speed depends on it: output is unchanged.
    pub(super) fn spec_floor(&self, spec: crate::spec::SpecParams) -> f32 {
        let min = self.cfg.spec_min_acceptance;
        if spec.explicit || self.cfg.spec_row_cost <= 0.0 {
            return min;
        }
        let row = self.cfg.spec_row_cost + self.draft_cost(spec.method).max(0.0);
        min.max(crate::spec::break_even_acceptance(
            self.cfg.spec_verify_base,
            row,
            spec.k,
        ))
    }

    /// Cost of drafting one token with `method`, in decode steps of the target: 0 for n-gram
    /// lookup, the layer share for layer-skip, the draft model's weight bytes over the target's;
    /// 0 when the backend does not say.
    fn draft_cost(&self, method: SpecMethod) -> f32 {
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f32 / b as f32 };
        match method {
            SpecMethod::Ngram { .. } => 0.0,
            SpecMethod::LayerSkip { layers } => ratio(layers, self.backend.n_layers()),
            SpecMethod::DraftModel => self.draft.as_ref().map_or(0.0, |d| {
                ratio(d.backend.weight_bytes(), self.backend.weight_bytes())
            }),
        }
    }

    pub(super) fn step(&mut self) -> Result<()> {
        self.admit();
        // A sequence whose request is gone is released (drop_request removes both together, so
        // this is only a safety net: such a sequence could not be picked for).
        let mut i = 0;
        while i < self.running.len() {
            if self.reqs.contains_key(&self.running[i].req) {
                i += 1;
            } else {
                let mut s = self.running.swap_remove(i);
                self.release(&mut s);
            }
        }
        // Forked choices sample from the prompt's logits first.
        let mut i = 0;
        while i < self.running.len() {
            if let Some(first) = self.running[i].pending.take() {
                if self.sample_into(i, first, None).is_none() {
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
        let want_logits = self.cfg.canary.is_some();
        let Core {
            running,
            reqs,
            backend,
            ..
        } = &mut *self;
        let mut chunks = Vec::with_capacity(plan.len());
        let mut picks: Vec<Pick<'_>> = Vec::new();
        // Picks per planned sequence: its own (one, or one per verify row) plus the first
        // token of each forked choice when this chunk ends choice 0's prompt.
        let mut n_picks = Vec::with_capacity(plan.len());
        let mut row = 0;
        for (&i, p) in idx.iter().zip(&plan) {
            let s = &running[i];
            let ends = p.start + p.feed.len() == s.tokens.len();
            let logits = if !p.draft.is_empty() {
                LogitsWanted::All
            } else if ends {
                LogitsWanted::Last
            } else {
                LogitsWanted::None
            };
            chunks.push(SeqChunk {
                tokens: &p.feed,
                start_pos: p.start,
                block_table: &s.table.blocks,
                logits,
            });
            let before = picks.len();
            if let (true, Some(r)) = (logits != LogitsWanted::None, reqs.get(&s.req)) {
                let (prompt, output) = s.tokens.split_at(s.prompt_len);
                let base = Pick {
                    row,
                    params: &r.s.params,
                    prompt,
                    output,
                    extra: &[],
                    sequence: s.choice,
                    position: s.tokens.len() as u64,
                    logprobs: r.s.logprobs.map(|k| k as usize),
                    want_logits: want_logits || r.s.return_logits,
                };
                if p.draft.is_empty() {
                    let forks = if s.choice == 0 && s.tokens.len() == s.prompt_len {
                        r.s.n
                    } else {
                        1
                    };
                    for c in 0..forks {
                        picks.push(Pick {
                            sequence: s.choice + c,
                            ..base.clone()
                        });
                    }
                } else {
                    for j in 0..=p.draft.len() {
                        picks.push(Pick {
                            row: row + j,
                            extra: &p.draft[..j],
                            position: base.position + j as u64,
                            ..base.clone()
                        });
                    }
                }
            }
            row += match logits {
                LogitsWanted::None => 0,
                LogitsWanted::Last => 1,
                LogitsWanted::All => p.feed.len(),
            };
            n_picks.push(picks.len() - before);
        }
        let mut picked = backend.forward_pick(&chunks, &picks)?.into_iter();
        drop((chunks, picks));
        let mut sampled = Vec::new();
        let mut verify = Vec::new();
        for ((&i, p), n) in idx.iter().zip(plan).zip(n_picks) {
            let r: Vec<Picked> = picked.by_ref().take(n).collect();
            if p.draft.is_empty() {
                self.running[i].computed += p.feed.len();
                self.index_full_blocks(i);
                if !r.is_empty() {
                    sampled.push((p.key, r));
                }
            } else {
                verify.push((p.key, p.draft, r));
            }
        }
        for (key, mut r) in sampled {
            let Some(i) = self.running.iter().position(|s| s.order == key) else {
                continue;
            };
            let forks = r.split_off(1);
            self.fork_choices(i, forks);
            self.sample_into(i, r.pop().expect("one pick"), None);
        }
        for (key, draft, rows) in verify {
            self.accept(key, &draft, rows);
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
            // A speculating sequence feeds its last token plus up to `spec_k` drafts.
            let n = if spec_k > 0 {
                1 + spec_k
            } else {
                (s.tokens.len() - s.computed).min(budget).max(1)
            };
            if self.reserve(i, n) {
                budget -= n;
                let s = &self.running[i];
                let plain = if spec_k > 0 { 1 } else { n };
                plan.push(Planned {
                    key,
                    feed: s.tokens[s.computed..s.computed + plain].to_vec(),
                    start: s.computed,
                    draft: Vec::new(),
                    spec_k,
                    method: if spec_k > 0 { method } else { None },
                });
            }
        }
        plan.retain(|p| self.running.iter().any(|s| s.order == p.key));
        self.run_drafters(&mut plan)?;
        Ok(plan)
    }

    /// Runs each drafting method once over all the planned sequences that use it, and appends
    /// the drafts to their feeds.
    fn run_drafters(&mut self, plan: &mut [Planned]) -> Result<()> {
        let mut methods: Vec<SpecMethod> = Vec::new();
        for m in plan.iter().filter_map(|p| p.method) {
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
        for m in methods {
            let members: Vec<(u64, usize, usize)> = (0..plan.len())
                .filter(|&j| plan[j].method == Some(m))
                .map(|j| (plan[j].key, plan[j].spec_k, j))
                .collect();
            let Core {
                running,
                backend,
                draft,
                ..
            } = &mut *self;
            let mut jobs = Vec::new();
            let mut slots = Vec::new();
            for s in running.iter_mut() {
                if let Some(&(_, k, j)) = members.iter().find(|(key, _, _)| *key == s.order) {
                    let Seq {
                        tokens,
                        table,
                        draft_state,
                        ..
                    } = s;
                    jobs.push(DraftJob {
                        tokens,
                        k,
                        target_table: &table.blocks,
                        state: draft_state,
                        draft: Vec::new(),
                    });
                    slots.push(j);
                }
            }
            let target = &mut **backend;
            match m {
                SpecMethod::Ngram { max_n } => NgramDrafter { max_n }.draft(target, &mut jobs)?,
                SpecMethod::LayerSkip { layers } => {
                    LayerSkipDrafter { layers }.draft(target, &mut jobs)?
                }
                SpecMethod::DraftModel => {
                    if let Some(d) = draft.as_mut() {
                        d.draft(target, &mut jobs)?;
                    }
                }
            }
            let drafts: Vec<Vec<u32>> = jobs.into_iter().map(|j| j.draft).collect();
            for (j, d) in slots.into_iter().zip(drafts) {
                plan[j].feed.extend_from_slice(&d);
                plan[j].draft = d;
            }
        }
        Ok(())
    }

    /// Speculative acceptance: walk the verify rows, choosing each position's token exactly as
    /// plain decode would; keep going while it equals the draft. The K/V of rejected drafts is
    /// dropped by truncating the block table.
    fn accept(&mut self, key: u64, draft: &[u32], rows: Vec<Picked>) {
        let Some(i) = self.running.iter().position(|s| s.order == key) else {
            return;
        };
        // The verify chunk wrote the last token and the drafts; only accepted ones stay valid.
        let mut accepted = 0;
        for (j, row) in rows.into_iter().enumerate() {
            let d = draft.get(j).copied();
            match self.sample_into(i, row, d) {
                None => break,
                Some(t) if Some(t) == d => accepted += 1,
                Some(_) => break,
            }
        }
        self.counters.spec_drafted += draft.len() as u64;
        self.counters.spec_accepted += accepted as u64;
        let c = &mut self.counters;
        if c.spec_accepted_at.len() < draft.len() {
            c.spec_accepted_at.resize(draft.len(), 0);
            c.spec_drafted_at.resize(draft.len(), 0);
        }
        for a in &mut c.spec_accepted_at[..accepted] {
            *a += 1;
        }
        for d in &mut c.spec_drafted_at[..draft.len()] {
            *d += 1;
        }
        let Some(i) = self.running.iter().position(|s| s.order == key) else {
            return;
        };
        let s = &mut self.running[i];
        s.computed = s.tokens.len() - 1;
        s.drafted += draft.len() as u32;
        s.accepted += accepted as u32;
        s.record_verify(draft.len(), accepted);
        // The same per-token estimate the tune's break-even acceptance is stated in (a verify of
        // k drafts accepting a fraction of them is a different quantity).
        if s.acceptance() < s.spec_floor.unwrap_or(self.cfg.spec_min_acceptance) {
            s.spec_pause = 16;
        }
        let computed = s.computed;
        // The draft model's KV stays valid up to the last accepted draft token.
        let Core { running, draft, .. } = &mut *self;
        if let Some(dm) = draft.as_mut() {
            dm.rollback(&mut running[i].draft_state, computed);
        }
        self.bm.truncate(&mut self.running[i].table, computed);
        self.index_full_blocks(i);
    }
}
