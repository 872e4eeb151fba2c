//! The paged KV cache's ops on the device: appending K/V rows (fused with RoPE) and copying
//! blocks for copy-on-write (kernels/kv_append.cu), and attention over the cache for every query
//! row (kernels/attention.cu).

use super::launch::Launch;
use super::linear_tc::RopeAppend;
use super::ops::{check, i32_of, DevMatrix};
use super::CudaDevice;
use crate::error::Result;
use crate::models::RopeStyle;
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Where one step's query rows read and write the paged KV cache (all `[rows]` u32 on the
/// device except `tables`): `pos` = each row's position, `slots` = the cache slot its K/V go to,
/// `row_tab` = the offset of its sequence's block table in `tables` (the step's block tables,
/// concatenated).
pub struct KvIndex {
    pub pos: CudaSlice<u32>,
    pub slots: CudaSlice<u32>,
    pub row_tab: CudaSlice<u32>,
    pub tables: CudaSlice<u32>,
    /// `pos` on the host (sizes the split-parallel attention's grid).
    pub host_pos: Vec<u32>,
    /// `row_tab` on the host (whether the rows share one block table, as `attn_rows_f32` needs;
    /// empty: unknown, so they are taken not to).
    pub host_tab: Vec<u32>,
}

impl KvIndex {
    /// Whether every row reads the same block table (one sequence's prefill chunk, say).
    pub fn one_table(&self) -> bool {
        share_one_table(&self.host_tab, self.host_pos.len())
    }

    /// [`KvIndex::one_table`], and the rows at consecutive positions (a prefill chunk, a verify
    /// pass): the case [`CudaDevice::attention`] gives the rows path, whose blocks read the block
    /// table at every position between their rows' first key and last row.
    pub fn one_run_of_positions(&self) -> bool {
        self.one_table()
            && self
                .host_pos
                .windows(2)
                .all(|w| w[1] == w[0].wrapping_add(1))
    }
}

/// Whether `host_tab` (each row's block-table offset) gives all `rows` rows one table; a
/// table list of another length (not known on the host) does not.
fn share_one_table(host_tab: &[u32], rows: usize) -> bool {
    host_tab.len() == rows && host_tab.windows(2).all(|w| w[0] == w[1])
}

/// Which kernels [`CudaDevice::attention`] runs; all give bit-identical results.
pub enum AttnPath<'a> {
    /// The split-parallel kernels when a row has several splits and their partials fit in
    /// 64 MiB, else one block per (row, head) walking the splits.
    Auto,
    /// One block per (row, head) walks the row's splits (`attn_paged_f32`).
    Walk,
    /// A row's splits in parallel blocks (`attn_split_f32`), merged by `attn_combine_f32`, into a
    /// partials buffer allocated for this call.
    Split,
    /// As `Split`, into `part` (`[rows, heads, nz, head_dim + 2]` f32 at least) on a grid of `nz`
    /// splits per row, `nz` at least any row's split count (blocks past a row's last split exit):
    /// fixed buffers and a fixed grid, as a captured CUDA graph needs.
    Workspace {
        part: &'a mut CudaSlice<f32>,
        nz: usize,
    },
    /// `attn_rows_f32`: blocks of `ATTN_ROWS_Q` rows reading each split's keys and values once
    /// for all of them (compiled when `ATTN_ROWS` > 0; the rows must share one block table,
    /// [`KvIndex::one_table`]). [`CudaDevice::attention`] takes it for `Auto` steps of at least
    /// `ATTN_ROWS` rows that do, at consecutive positions ([`KvIndex::one_run_of_positions`]).
    Rows,
}

/// Bytes of split partials the split-parallel attention may use in one launch; beyond that the
/// splits run one after another inside each block (same results either way).
pub const ATTN_PART_BYTES: usize = 64 << 20;

impl CudaDevice {
    /// Writes each row's K and V (`[rows, width]` f32, width = n_kv_heads * head_dim) into its
    /// cache slot: `kc[slots[t] * width ..] = k[t]`, same for V.
    pub fn kv_append(
        &self,
        k: &CudaSlice<f32>,
        v: &CudaSlice<f32>,
        kc: &mut CudaSlice<f32>,
        vc: &mut CudaSlice<f32>,
        slots: &CudaSlice<u32>,
        width: usize,
    ) -> Result<()> {
        let rows = slots.len();
        check(k.len() == rows * width && v.len() == k.len(), || {
            "kv_append: shapes".into()
        })?;
        let f = self.function("kv_append.cu", "kv_append_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, (width as u32).div_ceil(256), 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let w = i32_of(width, "width")?;
        let mut b = self.launcher(&f);
        b.arg(k).arg(v).arg(kc).arg(vc).arg(slots).arg(&w);
        // SAFETY: signature matches; slots index the cache (the block manager hands them out).
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// [`CudaDevice::rope`] on `q` (`[rows, nh, hd]` f32) and `k` (`[rows, nkv, hd]`), then
    /// [`CudaDevice::kv_append`] of the rotated `k` and of `v`, in one launch with the same
    /// per-element operations (kernels/kv_append.cu `rope_qk_append_f32`). Errors: shapes that
    /// do not add up.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_qk_append(
        &self,
        q: &mut CudaSlice<f32>,
        k: &mut CudaSlice<f32>,
        v: &CudaSlice<f32>,
        kc: &mut CudaSlice<f32>,
        vc: &mut CudaSlice<f32>,
        idx: &KvIndex,
        inv_freq: &CudaSlice<f32>,
        (nh, nkv): (usize, usize),
        style: RopeStyle,
    ) -> Result<()> {
        let hd = inv_freq.len() * 2;
        let rows = idx.pos.len();
        check(
            q.len() == rows * nh * hd
                && k.len() == rows * nkv * hd
                && v.len() == k.len()
                && idx.slots.len() == rows
                && hd <= 2048,
            || {
                format!(
                    "rope_qk_append: q {} k {} for {rows} x ({nh}, {nkv}) x {hd}",
                    q.len(),
                    k.len()
                )
            },
        )?;
        let f = self.function("kv_append.cu", "rope_qk_append_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, (nh + nkv) as u32, 1),
            block_dim: ((hd / 2) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (nhi, nkvi, hdi) = (
            i32_of(nh, "heads")?,
            i32_of(nkv, "kv heads")?,
            i32_of(hd, "head_dim")?,
        );
        let interleaved = i32::from(style == RopeStyle::Interleaved);
        let mut b = self.launcher(&f);
        b.arg(q)
            .arg(k)
            .arg(v)
            .arg(kc)
            .arg(vc)
            .arg(&idx.pos)
            .arg(&idx.slots)
            .arg(inv_freq)
            .arg(&nhi)
            .arg(&nkvi)
            .arg(&hdi)
            .arg(&interleaved);
        // SAFETY: signature matches; shapes checked above; slots index the cache (the block
        // manager hands them out).
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// The split-K reduce of a Q|K|V matrix with [`CudaDevice::rope_qk_append`] on top
    /// (kernels/kv_append.cu `linear_tcs_reduce_rope_append`, TCS_ROPE = 1): from `part`
    /// (`[slices][m][w.rows]` f32, the split-K form's slice sums) each q/k/v element is summed as
    /// `linear_tcs_reduce` sums it, then the bias; q and k are rotated as `rope_qk_append_f32`
    /// rotates them; q, k, v (`ys`: `[m, nh, hd]`, `[m, nkv, hd]`, `[m, nkv, hd]` f32) and the
    /// cache slots get what the two unfused launches would leave there, bit for bit. Launches
    /// nothing and returns false when the outputs are not the three of `ra.heads` with
    /// `ra.inv_freq`'s head_dim for `ra.idx`'s m rows (the caller then reduces as usual).
    /// Errors: a launch failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_rope_append(
        &self,
        part: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        slices: u32,
        ra: &mut RopeAppend<'_>,
    ) -> Result<bool> {
        let (nh, nkv) = ra.heads;
        let hd = ra.inv_freq.len() * 2;
        if ys.len() != 3
            || rows != [nh * hd, nkv * hd, nkv * hd]
            || ra.idx.pos.len() != m
            || ra.idx.slots.len() != m
            || w.rows != (nh + 2 * nkv) * hd
            || hd == 0
            || hd > 2048
        {
            return Ok(false);
        }
        let f = self.function("kv_append.cu", "linear_tcs_reduce_rope_append")?;
        let cfg = LaunchConfig {
            grid_dim: (m as u32, (nh + nkv) as u32, 1),
            block_dim: ((hd / 2) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (mi, nhi, nkvi, hdi) = (
            i32_of(m, "m")?,
            i32_of(nh, "heads")?,
            i32_of(nkv, "kv heads")?,
            i32_of(hd, "head_dim")?,
        );
        let interleaved = i32::from(ra.style == RopeStyle::Interleaved);
        let si = slices as i32;
        let null = 0u64;
        let [q, k, v] = ys else {
            return Ok(false);
        };
        let mut b = self.launcher(&f);
        b.arg(part);
        match &w.bias {
            Some(bias) => b.arg(bias),
            None => b.arg(&null),
        };
        b.arg(&**q)
            .arg(&**k)
            .arg(&**v)
            .arg(&*ra.kc)
            .arg(&*ra.vc)
            .arg(&ra.idx.pos)
            .arg(&ra.idx.slots)
            .arg(ra.inv_freq)
            .arg(&mi)
            .arg(&nhi)
            .arg(&nkvi)
            .arg(&hdi)
            .arg(&interleaved)
            .arg(&si);
        // SAFETY: linear_tcs_reduce_rope_append(part, bias, q, k, v, kc, vc, pos, slots,
        // inv_freq, M, nh, nkv, hd, interleaved, slices): part holds slices·m·R f32 written by the
        // split-K form (R = w.rows = (nh + 2 nkv) hd, checked), bias (or null) R f32, the outputs
        // m·nh·hd and m·nkv·hd f32 (checked), pos/slots m u32 (checked); the slots index the cache
        // (the block manager hands them out).
        unsafe { b.launch(cfg) }?;
        Ok(true)
    }

    /// Copies block `src` to block `dst` of a cache laid out in blocks of `per_block` floats.
    pub fn kv_copy_block(
        &self,
        cache: &mut CudaSlice<f32>,
        src: u32,
        dst: u32,
        per_block: usize,
    ) -> Result<()> {
        let f = self.function("kv_append.cu", "kv_copy_block_f32")?;
        let cfg = LaunchConfig::for_num_elems(per_block as u32);
        let (s, d, n) = (src as i32, dst as i32, i32_of(per_block, "per_block")?);
        let mut b = self.launcher(&f);
        b.arg(cache).arg(&s).arg(&d).arg(&n);
        // SAFETY: signature matches; src and dst are blocks of this cache.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Attention of every query row over its paged KV (kernels/attention.cu):
    /// `q`, `out`: `[rows, heads, head_dim]` f32; `kc`/`vc`: one layer's cache; `window`: the
    /// sliding window in positions (None = global); `scale`: the score scale. KV splits of
    /// ATTN_SPLIT (default 256) positions, merged in a fixed order. `path` picks the kernels
    /// ([`AttnPath`]); every path gives bit-identical results (the self-check compares them).
    /// A step of at least `ATTN_WIDE_ROWS` rows (`ATTN_WIDE_ROWS_F16` with the f16 cache, where
    /// set), or whose rows reach `ATTN_WIDE_SPLITS` KV splits
    /// (the largest row's count; on [`AttnPath::Workspace`] the grid's, so that a CUDA graph
    /// decides by its key), runs the `_wide` entries, `ATTN_HEADS_WIDE` query heads a block
    /// instead of `ATTN_HEADS` (0, the defaults: never; same bits).
    /// Errors: shapes that do not add up, or a workspace too small for its `nz`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        q: &CudaSlice<f32>,
        kc: &CudaSlice<f32>,
        vc: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        idx: &KvIndex,
        heads: (usize, usize, usize),
        block_size: usize,
        window: Option<usize>,
        scale: f32,
        path: AttnPath<'_>,
    ) -> Result<()> {
        let wide_rows = self.attn_wide_rows();
        let wide_splits = self.define("ATTN_WIDE_SPLITS", 0) as usize;
        let splits = || match &path {
            AttnPath::Workspace { nz, .. } => *nz,
            _ => self.attn_splits(idx, window.unwrap_or(0)),
        };
        let wide = (wide_rows > 0 && idx.pos.len() >= wide_rows)
            || (wide_splits > 0 && splits() >= wide_splits);
        let rows_min = self.define("ATTN_ROWS", 0) as usize;
        let path = match path {
            AttnPath::Auto
                if rows_min > 0 && idx.pos.len() >= rows_min && idx.one_run_of_positions() =>
            {
                AttnPath::Rows
            }
            p => p,
        };
        let args = (heads, block_size, window, scale);
        self.attention_as(q, kc, vc, out, idx, args, path, wide)
    }

    /// The row count from which a step takes the `_wide` entries (0: never): `ATTN_WIDE_ROWS`,
    /// or with the f16 cache (`KV_F16 = 1`) `ATTN_WIDE_ROWS_F16` where that is set.
    pub fn attn_wide_rows(&self) -> usize {
        let rows = self.define("ATTN_WIDE_ROWS", 0);
        let rows = if self.define("KV_F16", 0) == 1 {
            self.define("ATTN_WIDE_ROWS_F16", rows)
        } else {
            rows
        };
        rows as usize
    }

    /// Whether the defines compile the `_wide` entries (kernels/attention.cu `ATTN_WIDE`):
    /// `ATTN_WIDE_ROWS` or `ATTN_WIDE_SPLITS` set, or `ATTN_WIDE_ROWS_F16` with the f16 cache.
    pub fn attn_wide_compiled(&self) -> bool {
        self.define("ATTN_WIDE_ROWS", 0) > 0
            || self.define("ATTN_WIDE_SPLITS", 0) > 0
            || (self.define("KV_F16", 0) == 1 && self.define("ATTN_WIDE_ROWS_F16", 0) > 0)
    }

    /// [`kv_splits`] of `idx`'s rows at this device's `ATTN_SPLIT`.
    fn attn_splits(&self, idx: &KvIndex, window: usize) -> usize {
        kv_splits(
            &idx.host_pos,
            window,
            self.define("ATTN_SPLIT", 256) as usize,
        )
    }

    /// [`CudaDevice::attention`] with the head grouping chosen by the caller: `wide` runs the
    /// `_wide` entries (`ATTN_HEADS_WIDE` heads a block) whatever the row count. `args`:
    /// (heads (nh, nkv, head_dim), block_size, window, scale). The self-check compares both.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_as(
        &self,
        q: &CudaSlice<f32>,
        kc: &CudaSlice<f32>,
        vc: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        idx: &KvIndex,
        (heads, block_size, window, scale): ((usize, usize, usize), usize, Option<usize>, f32),
        path: AttnPath<'_>,
        wide: bool,
    ) -> Result<()> {
        let (nh, nkv, hd) = heads;
        let rows = idx.pos.len();
        let split = self.define("ATTN_SPLIT", 256) as usize;
        check(
            q.len() == rows * nh * hd
                && out.len() == q.len()
                && hd <= split
                && hd.is_multiple_of(4)
                && nkv > 0
                && nh.is_multiple_of(nkv)
                && idx.host_pos.len() == rows,
            || {
                format!(
                    "attention: q {} for {rows} x {nh} x {hd} (nkv {nkv})",
                    q.len()
                )
            },
        )?;
        let w = window.unwrap_or(0);
        let nz = self.attn_splits(idx, w);
        let part_len = rows * nh * nz * (hd + 2);
        let mut fresh;
        let (part, nz) = match path {
            AttnPath::Rows => {
                let args = (heads, block_size, w, scale);
                return self.attention_rows(q, kc, vc, out, idx, args);
            }
            AttnPath::Walk => (None, nz),
            AttnPath::Auto if nz == 1 || part_len * 4 > ATTN_PART_BYTES => (None, nz),
            AttnPath::Auto | AttnPath::Split => {
                fresh = self.alloc::<f32>(part_len)?;
                (Some(&mut fresh), nz)
            }
            AttnPath::Workspace { part, nz: grid } => {
                check(
                    grid >= nz && part.len() >= rows * nh * grid * (hd + 2),
                    || {
                        format!(
                        "attention workspace: {} floats and {grid} splits for {rows} rows needing {nz}",
                        part.len()
                    )
                    },
                )?;
                (Some(part), grid)
            }
        };
        if let Some(part) = part {
            let args = (heads, block_size, w, scale);
            return self.attention_split(q, kc, vc, out, idx, args, part, nz, wide);
        }
        let name = if wide {
            "attn_paged_wide_f32"
        } else {
            "attn_paged_f32"
        };
        let f = self.function("attention.cu", name)?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, self.attn_head_blocks(nh, nkv, wide), 1),
            block_dim: (split as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let vals = AttnArgs::new((nh, nkv, hd), block_size, w, scale)?;
        let mut b = self.launcher(&f);
        vals.push(&mut b, (q, kc, vc, &*out), idx);
        // SAFETY: signature matches; shapes checked above; block tables cover every position
        // (the backend checks before launching).
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Attention blocks per (row, split): each takes up to ATTN_HEADS (default 1; `wide`:
    /// ATTN_HEADS_WIDE, default 4) query heads of one KV head's group of nh / nkv, so
    /// nkv · ceil(group / heads a block).
    fn attn_head_blocks(&self, nh: usize, nkv: usize, wide: bool) -> u32 {
        let per = if wide {
            self.define("ATTN_HEADS_WIDE", 4)
        } else {
            self.define("ATTN_HEADS", 1)
        };
        let per = per.max(1) as usize;
        (nkv * (nh / nkv).div_ceil(per)) as u32
    }

    /// The rows path of [`CudaDevice::attention`] (`attn_rows_f32`); shapes already checked.
    /// Errors: `ATTN_ROWS` = 0 (the entry is not compiled), rows on several block tables, the
    /// driver refusing the block's shared memory.
    fn attention_rows(
        &self,
        q: &CudaSlice<f32>,
        kc: &CudaSlice<f32>,
        vc: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        idx: &KvIndex,
        ((nh, nkv, hd), block_size, window, scale): ((usize, usize, usize), usize, usize, f32),
    ) -> Result<()> {
        let rows = idx.pos.len();
        check(self.define("ATTN_ROWS", 0) > 0 && idx.one_table(), || {
            format!(
                    "attention rows path: ATTN_ROWS {} (0: not compiled), {rows} rows on one block table: {}",
                    self.define("ATTN_ROWS", 0),
                    idx.one_table()
                )
        })?;
        let split = self.define("ATTN_SPLIT", 256) as usize;
        let gt = self.define("ATTN_ROWS_HEADS", 4).max(1) as usize;
        // ATTN_TILE = 1: the tiled entry where it is compiled for the shape (head_dim 128,
        // splits of 256) and its scores keep the walking kernel's order (not the f16 cache's
        // 8-element chunks, ATTN_KV16W), ATTN_TILE_ROWS rows a block; else ATTN_ROWS_Q rows.
        let kv16w = self.define("KV_F16", 0) == 1 && self.define("ATTN_KV16W", 0) == 1;
        let tile = self.define("ATTN_TILE", 0) == 1 && hd == 128 && split == 256 && !kv16w;
        let (file, name, qr, smem) = if tile {
            let tr = self.define("ATTN_TILE_ROWS", 16).max(1) as usize;
            let smem = attn_tile_smem_bytes(tr * gt, tr);
            ("attention_tile.cu", "attn_tile_f32", tr, smem)
        } else {
            let qr = self.define("ATTN_ROWS_Q", 2).max(1) as usize;
            let smem = attn_rows_smem_bytes(split, qr * gt);
            ("attention.cu", "attn_rows_f32", qr, smem)
        };
        let f = self.function(file, name)?;
        self.grant_smem(&format!("{file}:{name}"), &f, smem)?;
        let cfg = LaunchConfig {
            grid_dim: (
                rows.div_ceil(qr) as u32,
                (nkv * (nh / nkv).div_ceil(gt)) as u32,
                1,
            ),
            block_dim: (split as u32, 1, 1),
            shared_mem_bytes: smem,
        };
        let vals = AttnArgs::new((nh, nkv, hd), block_size, window, scale)?;
        let rowsi = i32_of(rows, "rows")?;
        let mut b = self.launcher(&f);
        vals.push(&mut b, (q, kc, vc, &*out), idx);
        b.arg(&rowsi);
        // SAFETY: signature matches; shapes checked by the caller; every row reads the block
        // table at row_tab[0] (checked above), which covers its positions.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// The split-parallel path of [`CudaDevice::attention`]; shapes already checked.
    #[allow(clippy::too_many_arguments)]
    fn attention_split(
        &self,
        q: &CudaSlice<f32>,
        kc: &CudaSlice<f32>,
        vc: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        idx: &KvIndex,
        ((nh, nkv, hd), block_size, window, scale): ((usize, usize, usize), usize, usize, f32),
        part: &mut CudaSlice<f32>,
        nz: usize,
        wide: bool,
    ) -> Result<()> {
        let rows = idx.pos.len();
        let split = self.define("ATTN_SPLIT", 256);
        let vals = AttnArgs::new((nh, nkv, hd), block_size, window, scale)?;
        let nzi = i32_of(nz, "splits")?;
        let name = if wide {
            "attn_split_wide_f32"
        } else {
            "attn_split_f32"
        };
        let f = self.function("attention.cu", name)?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, self.attn_head_blocks(nh, nkv, wide), nz as u32),
            block_dim: (split, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.launcher(&f);
        vals.push(&mut b, (q, kc, vc, &*part), idx);
        b.arg(&nzi);
        // SAFETY: signature matches; part holds rows × nh × nz × (hd + 2) floats; block tables
        // cover every position (the backend checks before launching).
        unsafe { b.launch(cfg) }?;
        let f = self.function("attention.cu", "attn_combine_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, nh as u32, 1),
            block_dim: ((hd as u32).div_ceil(32) * 32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.launcher(&f);
        b.arg(&*part)
            .arg(out)
            .arg(&idx.pos)
            .arg(&vals.nh)
            .arg(&vals.hd)
            .arg(&vals.window)
            .arg(&nzi);
        // SAFETY: signature matches; part was written above for every split a row has.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

/// The arguments the attention entries (`attn_paged_f32`, `attn_split_f32`, `attn_rows_f32` and
/// their `_wide` forms) share after the query, caches, output and index arrays, in their order:
/// heads, KV heads, head_dim, block_size (tokens), window (positions; 0 = global) and the score
/// scale, as the kernels' i32 / f32.
struct AttnArgs {
    nh: i32,
    nkv: i32,
    hd: i32,
    bs: i32,
    window: i32,
    scale: f32,
}

impl AttnArgs {
    /// Errors: a size past i32.
    fn new(
        (nh, nkv, hd): (usize, usize, usize),
        block_size: usize,
        window: usize,
        scale: f32,
    ) -> Result<Self> {
        Ok(AttnArgs {
            nh: i32_of(nh, "heads")?,
            nkv: i32_of(nkv, "kv heads")?,
            hd: i32_of(hd, "head_dim")?,
            bs: i32_of(block_size, "block_size")?,
            window: i32_of(window, "window")?,
            scale,
        })
    }

    /// Appends q, the two caches, the output (or partials) buffer, the index arrays (positions,
    /// each row's table offset, the tables) and these values to `b`.
    fn push<'a>(
        &'a self,
        b: &mut Launch<'a>,
        (q, kc, vc, out): (
            &'a CudaSlice<f32>,
            &'a CudaSlice<f32>,
            &'a CudaSlice<f32>,
            &'a CudaSlice<f32>,
        ),
        idx: &'a KvIndex,
    ) {
        b.arg(q)
            .arg(kc)
            .arg(vc)
            .arg(out)
            .arg(&idx.pos)
            .arg(&idx.row_tab)
            .arg(&idx.tables)
            .arg(&self.nh)
            .arg(&self.nkv)
            .arg(&self.hd)
            .arg(&self.bs)
            .arg(&self.window)
            .arg(&self.scale);
    }
}

/// The most KV splits of `split` positions any row attends over: a row at position `p` (0-based,
/// its own token included) covers positions `lo ..= p`, `lo = p + 1 - window` for a sliding
/// window of `window` positions (0: global, `lo = 0`), and the splits `lo / split ..= p / split`
/// (kernels/attention.cu walks the same ones). 1 for no rows. `split` must be positive.
pub fn kv_splits(positions: &[u32], window: usize, split: usize) -> usize {
    positions
        .iter()
        .map(|&p| {
            let p = p as usize;
            let lo = if window > 0 {
                (p + 1).saturating_sub(window)
            } else {
                0
            };
            p / split - lo / split + 1
        })
        .max()
        .unwrap_or(1)
}

/// Dynamic shared memory of `attn_rows_f32` (kernels/attention.cu: `AttnShared<slots>`, then each
/// slot's running max and sum) in bytes: 4 bytes a position of the split for its slots, then per
/// (row, head) slot the query (4 bytes an element, S / 4 float4), the scores (4·S), the V partials
/// (16·S), the tree scratch (4 bytes for each 32 positions), the struct rounded up to 16 bytes, and
/// the running pairs (8 bytes a slot): 4·S + (24.125·S + 8)·slots for S = `split` positions that
/// are a multiple of 128.
pub fn attn_rows_smem_bytes(split: usize, slots: usize) -> u32 {
    // The struct's members, then its size rounded up to its float4 alignment, then the pairs.
    let members = 4 * split + slots * (4 * split + 4 * split + 16 * split + 4 * (split / 32));
    (members.next_multiple_of(16) + 8 * slots) as u32
}

/// Dynamic shared memory of an `attn_tile_f32` block (bytes) for `slots` (row, head) slots of
/// `rows` rows (kernels/attention_tile.cu, above `attn_tile_f32`): q `[slots][132]` f32 (rows padded
/// by 4 floats), the K/V stage `[64][132]`, the split's scores `[slots][260]`, its 256 cache slots,
/// the split's and the running (m, l) of each slot, and each row's first and last key position.
pub fn attn_tile_smem_bytes(slots: usize, rows: usize) -> u32 {
    (4 * (slots * 132 + 64 * 132 + slots * 260 + 256 + 4 * slots + 2 * rows)) as u32
}

#[cfg(test)]
mod tests {
    use super::{attn_rows_smem_bytes, attn_tile_smem_bytes, kv_splits, share_one_table};

    /// The rows path needs every row on one block table, known on the host.
    #[test]
    fn one_table_needs_every_row_on_the_same_table() {
        assert!(share_one_table(&[7, 7, 7], 3));
        assert!(share_one_table(&[0], 1));
        assert!(!share_one_table(&[0, 0, 40], 3));
        assert!(!share_one_table(&[], 3));
        assert!(!share_one_table(&[0, 0], 3));
    }

    /// attn_rows_f32's shared memory at ATTN_SPLIT 256 with 4 rows of 4 heads: the kernel's
    /// `AttnShared<16>`, 1,024 bytes of slots and 6,176 a (row, head) slot, then 8 a slot for its
    /// running max and sum; the default 2 rows of 4 heads take 8 slots.
    #[test]
    fn attn_rows_smem_is_the_kernels_struct() {
        assert_eq!(attn_rows_smem_bytes(256, 16), 99_840 + 16 * 8);
        assert_eq!(attn_rows_smem_bytes(256, 8), 1_024 + 8 * (6_176 + 8));
        assert_eq!(attn_rows_smem_bytes(256, 1), 1_024 + 6_176 + 8);
        assert_eq!(attn_rows_smem_bytes(512, 8), 2_048 + 8 * (12_352 + 8));
        // 64 positions and 3 slots: members 256 + 3 · 1,544 = 4,888 bytes, rounded to 4,896.
        assert_eq!(attn_rows_smem_bytes(64, 3), 4_896 + 24);
    }

    /// attn_tile_f32's layout at 16 rows of 4 heads: q 33,792 bytes, the stage 33,792, scores
    /// 66,560, slots 1,024, two (m, l) pairs a slot 1,024, the rows' key bounds 128.
    #[test]
    fn attn_tile_smem_is_the_kernels_layout() {
        assert_eq!(
            attn_tile_smem_bytes(64, 16),
            33_792 + 33_792 + 66_560 + 1_024 + 1_024 + 128
        );
        assert_eq!(
            attn_tile_smem_bytes(32, 8),
            16_896 + 33_792 + 33_280 + 1_024 + 512 + 64
        );
    }

    /// Depth 8,192 plus 128 generated tokens is 33 splits of 256 (the row ATTN_WIDE_SPLITS = 32
    /// routes to the wide entries); a window counts only the splits it reaches; the largest row
    /// decides.
    #[test]
    fn kv_splits_counts_the_splits_a_row_reaches() {
        assert_eq!(kv_splits(&[8_319], 0, 256), 33);
        assert_eq!(kv_splits(&[255], 0, 256), 1);
        assert_eq!(kv_splits(&[256], 0, 256), 2);
        assert_eq!(kv_splits(&[3, 8_319, 700], 0, 256), 33);
        // Window 300 at position 699: positions 400..=699, splits 1..=2.
        assert_eq!(kv_splits(&[699], 300, 256), 2);
        // Window 256 at position 767: positions 512..=767, one split.
        assert_eq!(kv_splits(&[767], 256, 256), 1);
        // A window wider than the row is the global count.
        assert_eq!(kv_splits(&[699], 4_096, 256), 3);
        assert_eq!(kv_splits(&[], 0, 256), 1);
    }
}
