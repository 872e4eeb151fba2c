//! The device buffers of one forward step and the CUDA graphs captured over them.
//!
//! A decode step (every sequence one token, every row's logits wanted) launches about ten
//! kernels per layer — some 350 launches for an 8B model — each costing host time and a gap on
//! the GPU. Captured once into a CUDA graph (stream capture; CUDA C Programming Guide, "CUDA
//! Graphs") the whole step replays with one launch. A graph fixes its kernels' arguments, so a
//! graphed step keeps its buffers across steps ([`StepBuffers`], one set per row count `t`), takes
//! its per-step inputs (token ids, positions, KV slots, block tables) from device buffers refilled
//! before each replay, and runs attention on a fixed grid of `nz` KV splits per row
//! ([`super::ops::AttnPath::Workspace`], `nz` a power of two at least every row's split count),
//! or walks them in one kernel when every row has one split. Every kernel computes each row in
//! the same order as in an ungraphed step (the attention paths share one per-split routine and
//! merge splits in the same order), so the logits are bit-identical (DESIGN.md §3; the CUDA
//! lane's gates compare graphed steps with ungraphed ones). Each backend has a stream of its own,
//! so a capture never takes in another engine thread's launches.

use super::ops::KvIndex;
use super::{drv, CudaDevice};
use crate::error::Result;
use crate::models::ModelConfig;
use cudarc::driver::{CudaGraph, CudaSlice};
use std::collections::{HashMap, HashSet};

/// Host-side index arrays of one step (see [`KvIndex`]).
pub(super) struct StepPlan {
    pub tokens: Vec<u32>,
    pub pos: Vec<u32>,
    pub slots: Vec<u32>,
    pub row_tab: Vec<u32>,
    pub tables: Vec<u32>,
    /// Rows whose logits are wanted, in output order.
    pub wanted: Vec<u32>,
}

/// Every device buffer one forward step of `t` rows uses (f32 activations `[t, width]`; the
/// gathered rows and logits `[nw, hidden]` / `[nw, vocab]`), plus the step's index arrays.
pub(super) struct StepBuffers {
    pub t: usize,
    pub nw: usize,
    pub ids: CudaSlice<u32>,
    pub idx: KvIndex,
    pub x: CudaSlice<f32>,
    pub xn: CudaSlice<f32>,
    pub q: CudaSlice<f32>,
    pub q2: CudaSlice<f32>,
    pub k: CudaSlice<f32>,
    pub k2: CudaSlice<f32>,
    pub v: CudaSlice<f32>,
    pub attn: CudaSlice<f32>,
    pub o: CudaSlice<f32>,
    pub o2: CudaSlice<f32>,
    pub gate: CudaSlice<f32>,
    pub up: CudaSlice<f32>,
    pub act: CudaSlice<f32>,
    pub d: CudaSlice<f32>,
    /// The LM head's buffers when `nw > 0`.
    pub head: Option<HeadBuffers>,
    /// Attention split partials for [`super::ops::AttnPath::Workspace`] (graphed steps only).
    pub part: Option<CudaSlice<f32>>,
}

/// The wanted rows of a step (`rows`: `[nw]` indices), gathered (`sel`), normed (`seln`), and
/// their logits (`[nw, vocab]`).
pub(super) struct HeadBuffers {
    pub rows: CudaSlice<u32>,
    pub sel: CudaSlice<f32>,
    pub seln: CudaSlice<f32>,
    pub logits: CudaSlice<f32>,
}

impl StepBuffers {
    /// Buffers for `t` rows, `nw` wanted rows and block tables of up to `tables_cap` entries.
    /// Errors: out of device memory (naming the size).
    pub fn new(
        dev: &CudaDevice,
        c: &ModelConfig,
        t: usize,
        nw: usize,
        tables_cap: usize,
    ) -> Result<StepBuffers> {
        let (h, hd, nh, nkv, inter) = (
            c.hidden_size,
            c.head_dim,
            c.n_heads,
            c.n_kv_heads,
            c.intermediate_size,
        );
        let head = if nw > 0 {
            Some(HeadBuffers {
                rows: dev.alloc::<u32>(nw)?,
                sel: dev.alloc::<f32>(nw * h)?,
                seln: dev.alloc::<f32>(nw * h)?,
                logits: dev.alloc::<f32>(nw * c.vocab_size)?,
            })
        } else {
            None
        };
        Ok(StepBuffers {
            t,
            nw,
            ids: dev.alloc::<u32>(t)?,
            idx: KvIndex {
                pos: dev.alloc::<u32>(t)?,
                slots: dev.alloc::<u32>(t)?,
                row_tab: dev.alloc::<u32>(t)?,
                tables: dev.alloc::<u32>(tables_cap.max(1))?,
                host_pos: Vec::new(),
            },
            x: dev.alloc::<f32>(t * h)?,
            xn: dev.alloc::<f32>(t * h)?,
            q: dev.alloc::<f32>(t * nh * hd)?,
            q2: dev.alloc::<f32>(t * nh * hd)?,
            k: dev.alloc::<f32>(t * nkv * hd)?,
            k2: dev.alloc::<f32>(t * nkv * hd)?,
            v: dev.alloc::<f32>(t * nkv * hd)?,
            attn: dev.alloc::<f32>(t * nh * hd)?,
            o: dev.alloc::<f32>(t * h)?,
            o2: dev.alloc::<f32>(t * h)?,
            gate: dev.alloc::<f32>(t * inter)?,
            up: dev.alloc::<f32>(t * inter)?,
            act: dev.alloc::<f32>(t * inter)?,
            d: dev.alloc::<f32>(t * h)?,
            head,
            part: None,
        })
    }

    /// Copies the step's index arrays into the buffers (queued on the stream, before the
    /// step's kernels). The plan must have `t` rows, `nw` wanted rows and tables that fit.
    pub fn fill(&mut self, dev: &CudaDevice, p: &StepPlan) -> Result<()> {
        debug_assert!(p.tokens.len() == self.t && p.wanted.len() == self.nw);
        debug_assert!(p.tables.len() <= self.idx.tables.len());
        let s = dev.stream();
        s.memcpy_htod(&p.tokens, &mut self.ids).map_err(drv)?;
        s.memcpy_htod(&p.pos, &mut self.idx.pos).map_err(drv)?;
        s.memcpy_htod(&p.slots, &mut self.idx.slots).map_err(drv)?;
        s.memcpy_htod(&p.row_tab, &mut self.idx.row_tab)
            .map_err(drv)?;
        s.memcpy_htod(&p.tables, &mut self.idx.tables)
            .map_err(drv)?;
        if let Some(h) = &mut self.head {
            s.memcpy_htod(&p.wanted, &mut h.rows).map_err(drv)?;
        }
        self.idx.host_pos.clone_from(&p.pos);
        Ok(())
    }

    /// The logits `[nw, vocab]` f32 the step wrote (`None` when no row was wanted).
    pub fn logits(&self) -> Option<&CudaSlice<f32>> {
        self.head.as_ref().map(|h| &h.logits)
    }
}

/// What a graph is captured for, besides the row count: layers run and attention splits.
pub(super) type GraphKey = (usize, usize);

/// A captured graph, owned by one backend.
pub(super) struct OwnedGraph(pub CudaGraph);

// SAFETY: CUDA graph objects must not be used by two threads at once; an OwnedGraph lives inside
// one backend and is only touched through `&mut` access to it, so moving it to another thread
// (the engine thread that owns the backend) never makes it shared. cudarc binds the context to
// the calling thread before every launch.
unsafe impl Send for OwnedGraph {}

/// One row count's buffers and the graphs captured over them.
pub(super) struct GraphEntry {
    pub bufs: StepBuffers,
    /// Keys run once ungraphed (the warm-up that loads every kernel before a capture).
    pub seen: HashSet<GraphKey>,
    pub graphs: HashMap<GraphKey, OwnedGraph>,
}

/// The CUDA graphs of a backend, by row count `t`.
pub(super) struct Graphs {
    /// Steps of up to this many rows are graphed (0 = none).
    pub max_batch: usize,
    /// Gate canary: replays without refilling the step's inputs (stale positions and tokens).
    pub stale_canary: bool,
    pub entries: HashMap<usize, GraphEntry>,
}

impl Graphs {
    pub fn new(max_batch: usize) -> Graphs {
        Graphs {
            max_batch,
            stale_canary: false,
            entries: HashMap::new(),
        }
    }

    /// `t`'s entry with room for block tables of `tables` entries and `part` floats of attention
    /// partials; growing a buffer drops the graphs captured over the old one. Errors: out of
    /// device memory.
    pub fn entry(
        &mut self,
        dev: &CudaDevice,
        c: &ModelConfig,
        t: usize,
        tables: usize,
        part: usize,
    ) -> Result<&mut GraphEntry> {
        if let std::collections::hash_map::Entry::Vacant(v) = self.entries.entry(t) {
            v.insert(GraphEntry {
                bufs: StepBuffers::new(dev, c, t, t, tables.next_power_of_two())?,
                seen: HashSet::new(),
                graphs: HashMap::new(),
            });
        }
        let e = self.entries.get_mut(&t).expect("inserted above");
        if e.bufs.idx.tables.len() < tables {
            e.graphs.clear();
            e.seen.clear();
            e.bufs.idx.tables = dev.alloc::<u32>(tables.next_power_of_two())?;
        }
        if e.bufs.part.as_ref().map_or(0, |p| p.len()) < part {
            e.graphs.clear();
            e.seen.clear();
            e.bufs.part = None;
            e.bufs.part = Some(dev.alloc::<f32>(part)?);
        }
        Ok(e)
    }
}
