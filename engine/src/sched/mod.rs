//! Continuous-batching scheduler on its own thread (a CUDA context is thread-affine).
//!
//! Each step is one backend forward over decode rows plus prefill chunks under a token budget
//! (Orca, Yu et al. OSDI 2022; chunked prefill as in Sarathi, Agrawal et al. 2023). Admission is
//! first-come first-served by free KV blocks (prefix-cache hits count as already present). When
//! blocks run out mid-generation the newest sequence is preempted by recompute: its blocks are
//! freed and it re-enters the queue with its tokens so far; because logits do not depend on chunking
//! (the exactness contract), the recomputed continuation is identical. `n > 1` choices fork the
//! prompt's blocks after one prefill; shared partial blocks are copied before their first write.

mod step;
mod types;

pub use types::*;

use crate::backend::{Backend, Picked};
use crate::engine::FinishReason;
use crate::error::{Error, Result};
use crate::kv::prefix::{chain_hashes, PrefixCache};
use crate::kv::{BlockManager, BlockTable};
use crate::sample;
use crate::spec::{DraftModelDrafter, DraftState, Drafter};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// Scheduler limits.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// Most tokens (decode rows + prefill chunk tokens) in one forward.
    pub max_batch_tokens: usize,
    /// Most sequences running at once.
    pub max_running: usize,
    /// Most requests waiting for admission; more are refused with [`SubmitError::QueueFull`].
    pub queue_capacity: usize,
    /// Context length: prompt plus generated tokens per sequence.
    pub max_context: usize,
    /// A deliberately broken behaviour, for gate canaries only.
    pub canary: Option<SchedCanary>,
    /// Speculate only while at most this many sequences run (verify rows compete with other
    /// sequences' decode rows for the step).
    pub spec_max_running: usize,
    /// Stop speculating for a sequence whose estimated per-token acceptance (the probability a
    /// draft token is accepted given the ones before it were) falls below this; it probes again
    /// every 16 steps. `memra tune` writes the break-even acceptance of its measured verify costs
    /// ([`spec::break_even_acceptance`]). Speculation the server's default chose (not the
    /// request) pauses below the larger of this and its drafter's own break-even.
    pub spec_min_acceptance: f32,
    /// Cost of one more verify row, in decode steps of one sequence (a verify of k drafts costs
    /// about `spec_verify_base` + k × this, [`spec::verify_cost`]). With the sequence's
    /// estimated per-token acceptance it sets each step's draft length ([`spec::draft_len`]); 0
    /// always drafts the request's k.
    pub spec_row_cost: f32,
    /// The fixed part of a verify's cost, in decode steps (≥ 1; above 1 when steps of more than
    /// one row take a slower kernel path).
    pub spec_verify_base: f32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_batch_tokens: 512,
            max_running: 64,
            queue_capacity: 256,
            max_context: 8192,
            canary: None,
            spec_max_running: 8,
            spec_min_acceptance: 0.1,
            spec_row_cost: 0.0,
            spec_verify_base: 1.0,
        }
    }
}

enum Cmd {
    Submit(Box<Submit>),
    Cancel(RequestId),
    Shutdown,
}

/// Handle to the engine thread. Cheap to clone.
#[derive(Clone)]
pub struct SchedulerHandle {
    tx: Sender<Cmd>,
    stats: Arc<Mutex<Stats>>,
    queued: Arc<AtomicUsize>,
    stopped: Arc<AtomicBool>,
    cfg: SchedulerConfig,
    kv_positions: usize,
    /// Decoder layers of the target model (layer-skip drafts must use fewer).
    n_layers: usize,
}

/// Builds a backend on the engine thread (a CUDA context is thread-affine).
pub type BackendFactory = Box<dyn FnOnce() -> Result<Box<dyn Backend>> + Send>;

impl SchedulerHandle {
    /// Starts the engine thread; `make_backend` runs on it. Errors: the backend failed to start.
    pub fn spawn(make_backend: BackendFactory, cfg: SchedulerConfig) -> Result<SchedulerHandle> {
        Self::spawn_with_draft(make_backend, None, cfg)
    }

    /// [`SchedulerHandle::spawn`] with a draft model for `SpecMethod::DraftModel` requests (it
    /// must share the target's tokenizer: same vocabulary size, checked here).
    pub fn spawn_with_draft(
        make_backend: BackendFactory,
        make_draft: Option<BackendFactory>,
        cfg: SchedulerConfig,
    ) -> Result<SchedulerHandle> {
        let (tx, rx) = channel();
        let (init_tx, init_rx) = channel();
        let stats = Arc::new(Mutex::new(Stats::default()));
        let queued = Arc::new(AtomicUsize::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let (s2, q2, st2, c2) = (stats.clone(), queued.clone(), stopped.clone(), cfg.clone());
        std::thread::Builder::new()
            .name("memra-engine".into())
            .spawn(move || {
                let backend = match make_backend() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = init_tx.send(Err(e));
                        return;
                    }
                };
                let draft = match make_draft.map(|f| f()).transpose() {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = init_tx.send(Err(e));
                        return;
                    }
                };
                if let Some(d) = &draft {
                    if d.vocab_size() != backend.vocab_size() {
                        let _ = init_tx.send(Err(Error::InvalidArgument(format!(
                            "the draft model's vocabulary ({}) differs from the target's ({}); a draft model must share the tokenizer",
                            d.vocab_size(),
                            backend.vocab_size()
                        ))));
                        return;
                    }
                }
                let _ = init_tx.send(Ok((
                    backend.num_blocks() * backend.block_size(),
                    backend.n_layers(),
                )));
                let mut core = Core::new(backend, c2, s2, q2);
                core.draft = draft.map(DraftModelDrafter::new);
                core.run(rx);
                st2.store(true, Ordering::SeqCst);
            })
            .map_err(|e| Error::InvalidArgument(format!("cannot start engine thread: {e}")))?;
        let (kv_positions, n_layers) = init_rx
            .recv()
            .map_err(|_| Error::InvalidArgument("engine thread died while starting".into()))??;
        Ok(SchedulerHandle {
            tx,
            stats,
            queued,
            stopped,
            cfg,
            kv_positions,
            n_layers,
        })
    }

    /// Queues a request. Errors: the queue is full, the engine stopped, or the request can never
    /// run (empty prompt, n = 0, longer than the context or the whole KV cache).
    pub fn submit(&self, s: Submit) -> Result<(), SubmitError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(SubmitError::Stopped);
        }
        if s.prompt.is_empty() {
            return Err(SubmitError::Invalid("the prompt is empty".into()));
        }
        if s.n == 0 {
            return Err(SubmitError::Invalid("n must be at least 1".into()));
        }
        if s.prompt.len() >= self.cfg.max_context {
            return Err(SubmitError::Invalid(format!(
                "the prompt has {} tokens; the context length is {}",
                s.prompt.len(),
                self.cfg.max_context
            )));
        }
        if s.prompt.len() + 1 > self.kv_positions {
            return Err(SubmitError::Invalid(format!(
                "the prompt has {} tokens; the KV cache holds {} positions",
                s.prompt.len(),
                self.kv_positions
            )));
        }
        if let Err(e) = s.params.validate() {
            return Err(SubmitError::Invalid(e.to_string()));
        }
        if let Some(crate::spec::SpecParams {
            method: crate::spec::SpecMethod::LayerSkip { layers },
            ..
        }) = s.spec
        {
            if layers >= self.n_layers {
                return Err(SubmitError::Invalid(format!(
                    "layerskip:{layers} drafts with {layers} layers; the model has {} (use fewer)",
                    self.n_layers
                )));
            }
        }
        let q = self.queued.fetch_add(1, Ordering::SeqCst);
        if q >= self.cfg.queue_capacity {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(SubmitError::QueueFull {
                queued: q,
                retry_after_secs: 1,
            });
        }
        self.tx.send(Cmd::Submit(Box::new(s))).map_err(|_| {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            SubmitError::Stopped
        })
    }

    /// Cancels a request; its blocks are freed before the next step.
    pub fn cancel(&self, id: RequestId) {
        let _ = self.tx.send(Cmd::Cancel(id));
    }

    /// Current counters.
    pub fn stats(&self) -> Stats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Whether the engine thread has stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Asks the engine thread to finish: it fails everything in flight and exits.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Cmd::Shutdown);
    }
}

/// A request's shared state.
struct Req {
    s: Submit,
    running_choices: u32,
    dead: bool,
    /// Admitted at least once (it no longer counts as queued).
    admitted: bool,
}

/// One choice of one request.
struct Seq {
    req: RequestId,
    choice: u32,
    prompt_len: usize,
    /// Prompt plus generated tokens.
    tokens: Vec<u32>,
    /// Positions whose K/V are in the cache.
    computed: usize,
    table: BlockTable,
    /// Chained hashes of the full blocks already indexed in the prefix cache.
    hashed: Vec<u64>,
    /// The token already chosen for it from the prompt's logits (forked choices), to emit
    /// before feeding anything.
    pending: Option<Picked>,
    /// Admission order (for choosing preemption victims).
    order: u64,
    /// Speculative draft tokens proposed and accepted for this choice.
    drafted: u32,
    accepted: u32,
    /// Steps left before a probe when speculation is paused.
    spec_pause: u32,
    /// The acceptance floor of its request's speculation ([`Core::spec_floor`]), computed at
    /// its first speculative step.
    spec_floor: Option<f32>,
    /// Decayed counts of draft positions verified and accepted (a rejection ends a draft): the
    /// per-token acceptance estimate ([`Seq::acceptance`]) behind the draft length and the
    /// pause.
    spec_trials: f32,
    spec_hits: f32,
    /// The draft model's KV for this sequence (its own block pool) and how many positions of it
    /// are valid.
    draft_state: DraftState,
}

impl Seq {
    /// Estimated per-token acceptance: decayed accepted over verified draft positions. Both
    /// counts start at 2 (a prior of 2 of 2 accepted, so a new sequence starts near its
    /// request's k) and decay with the evidence, so the estimate can reach 0 when nothing is
    /// accepted (a prior added at every read would hold it above 2 / 7).
    fn acceptance(&self) -> f32 {
        self.spec_hits / self.spec_trials.max(f32::MIN_POSITIVE)
    }

    /// Counts a verify of `drafted` draft tokens of which the first `accepted` were accepted:
    /// the positions tried are the accepted ones plus the rejected one, if any; older evidence
    /// (and the prior) decays by 0.8 a verify. An empty draft is no evidence.
    fn record_verify(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        let tried = (accepted + usize::from(accepted < drafted)) as f32;
        self.spec_trials = 0.8 * self.spec_trials + tried;
        self.spec_hits = 0.8 * self.spec_hits + accepted as f32;
    }

    /// A choice with nothing computed yet and no blocks.
    fn new(req: RequestId, choice: u32, tokens: Vec<u32>, prompt_len: usize) -> Seq {
        Seq {
            req,
            choice,
            prompt_len,
            tokens,
            computed: 0,
            table: BlockTable::default(),
            hashed: Vec::new(),
            pending: None,
            order: 0,
            drafted: 0,
            accepted: 0,
            spec_pause: 0,
            spec_floor: None,
            spec_trials: 2.0,
            spec_hits: 2.0,
            draft_state: DraftState::default(),
        }
    }
}

struct Core {
    backend: Box<dyn Backend>,
    /// The draft model for `SpecMethod::DraftModel` requests, when one is loaded.
    draft: Option<DraftModelDrafter>,
    bm: BlockManager,
    prefix: PrefixCache,
    cfg: SchedulerConfig,
    reqs: HashMap<RequestId, Req>,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    stats: Arc<Mutex<Stats>>,
    queued: Arc<AtomicUsize>,
    counters: Stats,
    next_order: u64,
    /// State of the [`SchedCanary::SharedRng`] canary.
    shared_draws: u64,
}

impl Core {
    fn new(
        backend: Box<dyn Backend>,
        cfg: SchedulerConfig,
        stats: Arc<Mutex<Stats>>,
        queued: Arc<AtomicUsize>,
    ) -> Core {
        let bm = BlockManager::new(backend.num_blocks(), backend.block_size());
        Core {
            backend,
            draft: None,
            bm,
            prefix: PrefixCache::default(),
            cfg,
            reqs: HashMap::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            stats,
            queued,
            counters: Stats::default(),
            next_order: 0,
            shared_draws: 0,
        }
    }

    fn run(&mut self, rx: Receiver<Cmd>) {
        loop {
            // Block for work when idle; otherwise take what has arrived and step.
            if self.running.is_empty() && self.waiting.is_empty() {
                match rx.recv() {
                    Ok(c) => {
                        if !self.command(c) {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
            while let Ok(c) = rx.try_recv() {
                if !self.command(c) {
                    return;
                }
            }
            let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.step()));
            let failure = match stepped {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("engine error: {e}")),
                Err(p) => Some(format!(
                    "engine panic: {}",
                    p.downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| p.downcast_ref::<&str>().copied())
                        .unwrap_or("unknown")
                )),
            };
            if let Some(msg) = failure {
                // A failed step fails every request in flight, not the thread; the block state
                // starts over since a panic may have left it half-updated.
                tracing::error!(error = %msg, "engine step failed");
                let ids: Vec<RequestId> = self.reqs.keys().copied().collect();
                for id in ids {
                    self.emit(id, Event::Error(msg.clone()));
                    self.drop_request(id);
                }
                self.running.clear();
                self.waiting.clear();
                self.bm = BlockManager::new(self.backend.num_blocks(), self.backend.block_size());
                self.prefix = PrefixCache::default();
            }
            self.publish();
        }
    }

    fn command(&mut self, c: Cmd) -> bool {
        match c {
            Cmd::Submit(s) => {
                let mut s = *s;
                let id = s.id;
                if self.reqs.contains_key(&id) {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    (s.events)(Event::Error(format!("request id {id} is already in use")));
                    return true;
                }
                let seq = Seq::new(id, 0, s.prompt.clone(), s.prompt.len());
                self.reqs.insert(
                    id,
                    Req {
                        running_choices: s.n,
                        s,
                        dead: false,
                        admitted: false,
                    },
                );
                self.waiting.push_back(seq);
            }
            Cmd::Cancel(id) => self.drop_request(id),
            Cmd::Shutdown => {
                let ids: Vec<RequestId> = self.reqs.keys().copied().collect();
                for id in ids {
                    self.emit(id, Event::Error("server shutting down".into()));
                    self.drop_request(id);
                }
                return false;
            }
        }
        true
    }

    /// Sends `ev` to the request's listener; marks it dead if nobody listens.
    fn emit(&mut self, id: RequestId, ev: Event) {
        if let Some(r) = self.reqs.get_mut(&id) {
            if !r.dead && !(r.s.events)(ev) {
                r.dead = true;
            }
        }
    }

    /// Removes a request and frees every block its sequences hold.
    fn drop_request(&mut self, id: RequestId) {
        let Some(r) = self.reqs.remove(&id) else {
            return;
        };
        if !r.admitted {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        let mut keep = VecDeque::new();
        let waiting: Vec<Seq> = self.waiting.drain(..).collect();
        for mut s in waiting {
            if s.req == id {
                self.release(&mut s);
            } else {
                keep.push_back(s);
            }
        }
        self.waiting = keep;
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].req == id {
                let mut s = self.running.swap_remove(i);
                self.release(&mut s);
            } else {
                i += 1;
            }
        }
    }

    fn publish(&mut self) {
        self.counters.queued = self.queued.load(Ordering::SeqCst);
        self.counters.running = self.running.len();
        self.counters.kv_blocks_free = self.bm.free_blocks();
        self.counters.prefix_cached_blocks = self.prefix.len();
        // Blocks held only by the prefix cache are reclaimable: not "used".
        self.counters.kv_blocks_used =
            self.bm.num_blocks() - self.bm.free_blocks() - self.prefix.idle_blocks(&self.bm);
        if let Ok(mut s) = self.stats.lock() {
            *s = self.counters.clone();
        }
    }

    /// Makes `need` blocks free if possible, evicting idle prefix-cache entries first.
    fn make_room(&mut self, need: usize) -> bool {
        if self.bm.free_blocks() < need {
            let short = need - self.bm.free_blocks();
            self.prefix.evict(&mut self.bm, short);
        }
        self.bm.free_blocks() >= need
    }

    fn admit(&mut self) {
        let bs = self.bm.block_size();
        while self.running.len() < self.cfg.max_running {
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            match self.reqs.get(&seq.req) {
                None => continue,
                Some(r) if r.dead => {
                    self.drop_request(seq.req);
                    continue;
                }
                Some(_) => {}
            }
            // Prefix hits: full blocks strictly before the last token (its logits are needed).
            let tenant = self.reqs[&seq.req].s.tenant.clone();
            let usable = (seq.tokens.len() - 1) / bs * bs;
            let hashes = chain_hashes(&tenant, &seq.tokens[..usable], bs);
            let hits = self.prefix.lookup(&mut self.bm, &hashes, &seq.tokens, bs);
            let need = self.bm.blocks_for(seq.tokens.len() + 1) - hits.len();
            if !self.make_room(need) {
                for b in hits {
                    self.bm.release(b);
                }
                self.waiting.push_front(seq);
                break;
            }
            seq.computed = hits.len() * bs;
            let mut hits = hits;
            if self.cfg.canary == Some(SchedCanary::PrefixOffByOne) && hits.len() >= 2 {
                hits.rotate_left(1);
            }

            seq.table = BlockTable {
                len: seq.computed,
                blocks: hits,
            };
            seq.hashed = hashes[..seq.table.blocks.len()].to_vec();
            seq.order = self.next_order;
            self.next_order += 1;
            let r = self.reqs.get_mut(&seq.req).expect("checked");
            if !r.admitted {
                r.admitted = true;
                self.queued.fetch_sub(1, Ordering::SeqCst);
                self.counters.prefix_hit_tokens += seq.computed as u64;
                let (p, c) = (seq.prompt_len, seq.computed);
                self.emit(
                    seq.req,
                    Event::Started {
                        prompt_tokens: p,
                        cached_tokens: c,
                    },
                );
            }
            self.running.push(seq);
        }
    }

    /// Reserves room for `n` more positions of running sequence `i`, copying a shared partial
    /// block first, preempting newer sequences when blocks run out. False if `i` itself was
    /// preempted.
    fn reserve(&mut self, i: usize, n: usize) -> bool {
        loop {
            let s = &self.running[i];
            let bs = self.bm.block_size();
            let cow = self.cfg.canary != Some(SchedCanary::NoCopyOnWrite)
                && !s.computed.is_multiple_of(bs)
                && self.bm.refcount(s.table.blocks[s.computed / bs]) > 1;
            let need = self
                .bm
                .blocks_for(s.computed + n)
                .saturating_sub(s.table.blocks.len())
                + cow as usize;
            if self.make_room(need) {
                let s = &mut self.running[i];
                if cow {
                    let idx = s.computed / bs;
                    let old = s.table.blocks[idx];
                    let new = self.bm.allocate().expect("room made");
                    self.backend.copy_block(old, new);
                    self.bm.release(old);
                    s.table.blocks[idx] = new;
                }
                let end = s.computed + n;
                s.table.len = s.computed;
                self.bm.reserve(&mut s.table, end).expect("room made");
                return true;
            }
            // Preempt the newest running sequence (possibly `i` itself).
            let victim = (0..self.running.len())
                .max_by_key(|&j| self.running[j].order)
                .expect("non-empty");
            self.preempt(victim);
            self.counters.preemptions += 1;
            if victim == i {
                return false;
            }
            // swap_remove moved the last element into `victim`; `i` is unaffected unless it was
            // the last one.
            if i == self.running.len() {
                return false;
            }
        }
    }

    /// Frees every block a sequence holds (target and draft model).
    fn release(&mut self, s: &mut Seq) {
        self.bm.free_table(&mut s.table);
        if let Some(d) = self.draft.as_mut() {
            d.release(&mut s.draft_state);
        }
    }

    fn preempt(&mut self, j: usize) {
        let mut s = self.running.swap_remove(j);
        self.release(&mut s);
        s.computed = 0;
        s.hashed.clear();
        s.pending = None;
        self.waiting.push_front(s);
    }

    /// Puts newly completed blocks of sequence `i` into the prefix cache.
    fn index_full_blocks(&mut self, i: usize) {
        let bs = self.bm.block_size();
        let s = &self.running[i];
        let full = s.computed / bs;
        if full <= s.hashed.len() {
            return;
        }
        let tenant = &self.reqs[&s.req].s.tenant;
        let hashes = chain_hashes(tenant, &s.tokens[..full * bs], bs);
        for (b, h) in hashes.iter().enumerate().skip(s.hashed.len()) {
            let block = s.table.blocks[b];
            self.prefix
                .insert(&mut self.bm, *h, block, &s.tokens[b * bs..(b + 1) * bs]);
        }
        self.running[i].hashed = hashes;
    }

    /// After choice 0's prompt, starts choices 1..n on forks of its blocks; `forks[c - 1]` is
    /// choice `c`'s first token, chosen from the prompt's logits in the same step.
    fn fork_choices(&mut self, i: usize, forks: Vec<Picked>) {
        if forks.is_empty() {
            return;
        }
        let s = &self.running[i];
        let (req, prompt_len, tokens, table, hashed) = (
            s.req,
            s.prompt_len,
            s.tokens.clone(),
            s.table.clone(),
            s.hashed.clone(),
        );
        for (choice, first) in (1..).zip(forks) {
            let table = self.bm.fork(&table);
            let order = self.next_order;
            self.next_order += 1;
            self.running.push(Seq {
                computed: prompt_len,
                table,
                hashed: hashed.clone(),
                pending: Some(first),
                order,
                ..Seq::new(req, choice, tokens.clone(), prompt_len)
            });
        }
    }

    /// Emits the token `picked` chose for sequence `i`, and retires the sequence when it
    /// finishes. Returns the token while the sequence lives on, `None` once it was removed.
    /// `draft` is the speculative draft token at this position, if any (used only by the
    /// acceptance-threshold canary: the real rule compares it with the returned token).
    fn sample_into(&mut self, i: usize, picked: Picked, draft: Option<u32>) -> Option<u32> {
        let s = &self.running[i];
        let Some(r) = self.reqs.get(&s.req) else {
            let mut s = self.running.swap_remove(i);
            self.release(&mut s);
            return None;
        };
        let Picked {
            mut token,
            logprob,
            logits,
        } = picked;
        let mut logprob = logprob.map(|(logprob, top)| TokenLogprob {
            token,
            logprob,
            top,
        });
        // The canaries re-choose on the host from the raw row (every pick asks for it then).
        if let (Some(canary), Some(row)) = (self.cfg.canary, logits.as_deref()) {
            let p = &r.s.params;
            let (prompt, output) = s.tokens.split_at(s.prompt_len);
            let processed = sample::process(row, p, prompt, output);
            if canary == SchedCanary::SharedRng {
                let k = self.shared_draws;
                self.shared_draws += 1;
                token =
                    sample::choose_with_draw(&processed, p, || sample::rng::draw24(p.seed, 0, k));
            }
            if let (SchedCanary::AcceptByThreshold, Some(d)) = (canary, draft) {
                if sample::logprobs(&processed, d, 0).0.exp() >= 0.1 {
                    token = d;
                }
            }
            logprob = r.s.logprobs.map(|k| {
                let (lp, top) = sample::logprobs(&processed, token, k as usize);
                TokenLogprob {
                    token,
                    logprob: lp,
                    top,
                }
            });
        }
        let logits = if r.s.return_logits {
            logits.map(Arc::new)
        } else {
            None
        };
        let (req, choice) = (s.req, s.choice);
        let finish = if r.s.stop_ids.contains(&token) {
            Some(FinishReason::Stop)
        } else {
            None
        };
        if finish.is_none() {
            self.running[i].tokens.push(token);
            self.emit(
                req,
                Event::Token {
                    choice,
                    token,
                    logprob,
                    logits,
                },
            );
        }
        let s = &self.running[i];
        let r = &self.reqs[&req];
        let generated = s.tokens.len() - s.prompt_len;
        // Length: max_tokens, the context, or the whole KV cache (it could never fit alone).
        let kv_positions = self.bm.num_blocks() * self.bm.block_size();
        let finish = finish.or_else(|| {
            (generated >= r.s.max_tokens
                || s.tokens.len() >= self.cfg.max_context
                || s.tokens.len() >= kv_positions)
                .then_some(FinishReason::Length)
        });
        let dead = r.dead;
        if finish.is_none() && !dead {
            return Some(token);
        }
        let mut s = self.running.swap_remove(i);
        self.release(&mut s);
        if dead {
            self.drop_request(req);
            return None;
        }
        self.emit(
            req,
            Event::Finished {
                choice,
                reason: finish.expect("checked"),
                drafted: s.drafted,
                accepted: s.accepted,
            },
        );
        let r = self.reqs.get_mut(&req).expect("live");
        r.running_choices -= 1;
        if r.running_choices == 0 {
            self.emit(req, Event::Done);
            self.reqs.remove(&req);
        }
        None
    }
}

#[cfg(test)]
mod tests;
