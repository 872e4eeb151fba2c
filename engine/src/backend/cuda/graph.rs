//! The device buffers of one forward step and the CUDA graphs captured over them.
//!
//! A decode step (every sequence one token, every row's logits wanted) launches about ten
//! kernels per layer — some 350 launches for an 8B model — each costing host time and a gap on
//! the GPU. Captured once into a CUDA graph (stream capture; CUDA C Programming Guide, "CUDA
//! Graphs") the whole step replays with one launch. A graph fixes its kernels' arguments, so a
//! graphed step keeps its buffers across steps ([`StepBuffers`], one set per graphed row count
//! `t`; with `cuda_graph_bucket` > 1 steps are padded to batch-size buckets: [`bucket_rows`]), takes
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
                host_tab: Vec::new(),
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
        self.idx.host_tab.clone_from(&p.row_tab);
        Ok(())
    }

    /// The logits `[nw, vocab]` f32 the step wrote (`None` when no row was wanted).
    pub fn logits(&self) -> Option<&CudaSlice<f32>> {
        self.head.as_ref().map(|h| &h.logits)
    }
}

/// The row count a graphed step of `t` rows runs at, for bucket width `bucket` and graphs of
/// up to `max_batch` rows (`t` ≤ `max_batch`): `t` itself when `bucket` ≤ 1; else the next power
/// of two up to `bucket`, then the next multiple of `bucket` (vLLM's capture sizes 1, 2, 4, 8,
/// 16, 24, … for 8), never past `max_batch`. Fewer row counts mean fewer captures and fewer
/// step buffers kept; the padding rows cost compute (H200, 8B BF16, 20 rows padded to 24: −2.1%
/// decode tok/s, research/cuda-notes.md run 73).
pub fn bucket_rows(t: usize, bucket: usize, max_batch: usize) -> usize {
    let b = if bucket <= 1 {
        t
    } else if t <= bucket {
        t.next_power_of_two().min(bucket)
    } else {
        t.div_ceil(bucket) * bucket
    };
    b.min(max_batch).max(t)
}

impl StepPlan {
    /// Pads the plan to `rows` rows by repeating its last row (same token, position, KV slot
    /// and block table; every row wanted). A repeated row computes the same values as the row
    /// it copies (every kernel computes each row on its own, in the same order at any row
    /// count: DESIGN.md §3) and writes them to the same KV slot, so the real rows' logits and
    /// the KV cache are as without padding; its logits rows are never read.
    pub fn pad_to(&mut self, rows: usize) {
        let t = self.tokens.len();
        if t == 0 || rows <= t {
            return;
        }
        for v in [
            &mut self.tokens,
            &mut self.pos,
            &mut self.slots,
            &mut self.row_tab,
        ] {
            let last = v[t - 1];
            v.resize(rows, last);
        }
        self.wanted.extend(t as u32..rows as u32);
    }

    /// Drops the rows past `rows` again (a padded plan that ran ungraphed after all).
    pub fn truncate(&mut self, rows: usize) {
        for v in [
            &mut self.tokens,
            &mut self.pos,
            &mut self.slots,
            &mut self.row_tab,
            &mut self.wanted,
        ] {
            v.truncate(rows);
        }
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
    /// Batch-size bucket width: a step of `t` rows runs in the graph of [`bucket_rows`]`(t)`
    /// rows (1 = every row count its own graph).
    pub bucket: usize,
    /// Gate canary: replays without refilling the step's inputs (stale positions and tokens).
    pub stale_canary: bool,
    pub entries: HashMap<usize, GraphEntry>,
}

impl Graphs {
    pub fn new(max_batch: usize) -> Graphs {
        Graphs {
            max_batch,
            bucket: 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_rows_pads_to_powers_of_two_then_multiples() {
        let b8: Vec<usize> = (1..=32).map(|t| bucket_rows(t, 8, 32)).collect();
        assert_eq!(&b8[..8], &[1, 2, 4, 4, 8, 8, 8, 8]);
        assert_eq!(bucket_rows(9, 8, 32), 16);
        assert_eq!(bucket_rows(17, 8, 32), 24);
        assert_eq!(bucket_rows(25, 8, 32), 32);
        let mut sizes = b8.clone();
        sizes.dedup();
        assert_eq!(sizes, vec![1, 2, 4, 8, 16, 24, 32]);
        // Never past the graphed maximum, never below t; width 1 (or 0) is every row count.
        assert_eq!(bucket_rows(25, 8, 30), 30);
        assert_eq!(bucket_rows(5, 6, 32), 6);
        assert!((1..=32).all(|t| bucket_rows(t, 1, 32) == t && bucket_rows(t, 0, 32) == t));
        assert!((1..=64).all(|t| {
            let b = bucket_rows(t, 16, 64);
            b >= t && b <= 64 && (b == 64 || b.is_power_of_two() || b.is_multiple_of(16))
        }));
    }

    #[test]
    fn pad_to_repeats_the_last_row_and_wants_every_row() {
        let mut p = StepPlan {
            tokens: vec![5, 9, 11],
            pos: vec![3, 7, 130],
            slots: vec![3, 23, 514],
            row_tab: vec![0, 1, 3],
            tables: vec![0, 1, 2, 4, 5],
            wanted: vec![0, 1, 2],
        };
        p.pad_to(3);
        assert_eq!(p.tokens.len(), 3, "no padding to the same size");
        p.pad_to(5);
        assert_eq!(p.tokens, vec![5, 9, 11, 11, 11]);
        assert_eq!(p.pos, vec![3, 7, 130, 130, 130]);
        assert_eq!(p.slots, vec![3, 23, 514, 514, 514]);
        assert_eq!(p.row_tab, vec![0, 1, 3, 3, 3]);
        assert_eq!(p.tables, vec![0, 1, 2, 4, 5], "block tables unchanged");
        assert_eq!(p.wanted, vec![0, 1, 2, 3, 4]);
        p.truncate(3);
        assert_eq!(
            (p.tokens, p.pos, p.slots, p.row_tab, p.wanted),
            (
                vec![5, 9, 11],
                vec![3, 7, 130],
                vec![3, 23, 514],
                vec![0, 1, 3],
                vec![0, 1, 2]
            )
        );
    }
}
