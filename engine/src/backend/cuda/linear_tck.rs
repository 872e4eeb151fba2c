//! The cluster form of the wgmma split-K linear layers (TCK_CLUSTER; kernels/linear_tck.cu's
//! `linear_tck_*_cl` entries): which calls take it, its shared memory, and its launch. The plain
//! form and the split-K scratch are linear_tcg.rs's ([`CudaDevice::linear_tck`]).

use super::linear_tc::{Epilogue, SK_SCRATCH_FLOATS, TC_TILE_ROWS};
use super::linear_tcg::TCK_COUNTERS;
use super::ops::{i32_of, push_bias_outs, DevMatrix};
use super::CudaDevice;
use crate::error::Result;
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Dynamic shared memory the cluster entries of the wgmma split-K form (TCK_CLUSTER) add to
/// [`tck_smem_bytes`] (bytes): a slot of the slice sums a warpgroup (128 threads x `tokens` / 2
/// f32), then two 8-byte mbarriers a warpgroup, then 16 bytes of flags (a u32 a warpgroup).
pub fn tck_cl_smem_bytes(tokens: u32, wg: u32) -> u32 {
    wg * (128 * tokens / 2 * 4 + 16) + 16
}

/// The mode of the cluster entries (TCK_CLUSTER = 1, `on`) for one call of the wgmma split-K
/// form, or `None` for the form with partials and a reduce: a cluster holds a run's `slices`
/// blocks, so 2 to `max` slices (TCK_CL_MAX: 8, the portable cluster sizes, or up to 16 with the
/// non-portable opt-in); `Some(2)` where the reduce would take the
/// SwiGLU epilogue (two equal halves of I rows, I a multiple of 64 so that the gate and up halves
/// are whole row groups, `out` m·I), `Some(1)` with no epilogue (the outputs as the reduce would
/// store them), `None` for other epilogues (RoPE and KV append) or SwiGLU shapes.
pub fn tck_cluster(
    on: bool,
    max: u32,
    slices: u32,
    rows: &[usize],
    m: usize,
    epi: Option<&Epilogue<'_>>,
) -> Option<u32> {
    if !on || !(2..=max.min(16)).contains(&slices) {
        return None;
    }
    match epi {
        None => Some(1),
        Some(Epilogue::SwiGlu(out))
            if rows.len() == 2
                && rows[1] == rows[0]
                && rows[0].is_multiple_of(64)
                && out.len() == m * rows[0] =>
        {
            Some(2)
        }
        Some(_) => None,
    }
}

impl CudaDevice {
    /// [`CudaDevice::linear_tck`] on its cluster entries (`func` + `_cl`, TCK_CLUSTER = 1;
    /// `mode` from [`tck_cluster`]): grid (slices, runs, token blocks) in clusters of (slices, 1,
    /// 1), the slices' sums added in slice order inside the cluster (kernels/linear_tck.cu), so
    /// no partials and no reduce launch; mode 1 stores the outputs `ys` (row split `rows`), mode
    /// 2 SwiGLU into the epilogue's `out` ([m, I] f32; the gate and up sums meet in the split-K
    /// scratch, m·r f32, counted in the stream's counters). Runs as for the plain form, at most
    /// as many clusters as can be resident at once (`cuOccupancyMaxActiveClusters`); `f` = (the
    /// plain entry's name, tokens a block, warpgroups, shared memory, mode). Returns false
    /// (nothing launched) when not one cluster of that shape can be resident, or mode 2's sums
    /// or counters do not fit their scratch. Errors: the scratch's allocation, the
    /// shared-memory or cluster-size opt-in, a launch failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear_tck_cluster(
        &self,
        f: (&str, u32, u32, u32, u32),
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        slices: u32,
        epi: Option<&mut Epilogue<'_>>,
    ) -> Result<bool> {
        let (func, tokens, wg, smem, mode) = f;
        let (k, r) = (w.cols, w.rows);
        let name = format!("{func}_cl");
        let f = self.function("linear_tck.cu", &name)?;
        if smem > 48 << 10 {
            self.grant_smem(&name, &f, smem)?;
        }
        if slices > 8 {
            f.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
            )
            .map_err(super::drv)?;
        }
        let groups = (r as u32).div_ceil(4 * TC_TILE_ROWS as u32);
        let tok_groups = (m as u32).div_ceil(tokens);
        if mode == 2
            && (m * r > SK_SCRATCH_FLOATS || (groups / 2 * tok_groups) as usize > TCK_COUNTERS)
        {
            return Ok(false);
        }
        // Mode 2's meeting place for the halves and its counters (mode 1 passes nulls).
        let (part, cnt) = if mode == 2 {
            (
                Some(self.scratch(&self.sk_part, SK_SCRATCH_FLOATS, "split-K linear")?),
                Some(self.scratch(&self.sk_count, TCK_COUNTERS, "split-K linear")?),
            )
        } else {
            (None, None)
        };
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(128 * wg, smem as usize, None)
            .map_err(super::drv)?
            .max(1);
        let blocks =
            self.info().sm_count.max(1) as u32 * per_sm * self.define("QTC_SK_WAVES", 1).max(1);
        let block = (128 * wg, 1, 1);
        let mut b = self.launcher(&f);
        b.cluster_x(slices);
        let resident = b.max_active_clusters(LaunchConfig {
            grid_dim: (slices, 1, 1),
            block_dim: block,
            shared_mem_bytes: smem,
        })?;
        if resident == 0 {
            return Ok(false);
        }
        let runs = (blocks / (slices * tok_groups))
            .min((resident / tok_groups).max(1))
            .clamp(1, groups);
        let rg_run = groups.div_ceil(runs);
        let runs = groups.div_ceil(rg_run);
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let (si, gi, fi) = (slices as i32, rg_run as i32, mode as i32);
        let (r0, r1) = (
            i32_of(rows[0], "r0")?,
            i32_of(rows.get(1).copied().unwrap_or(0), "r1")?,
        );
        let null = 0u64;
        b.arg(x).arg(&w.data);
        match &w.aux {
            Some(aux) => b.arg(aux),
            None => b.arg(&null),
        };
        match part.as_ref().and_then(|p| p.as_ref()) {
            Some(p) => b.arg(p),
            None => b.arg(&null),
        };
        b.arg(&mi).arg(&ki).arg(&ri).arg(&si).arg(&gi);
        match (mode, epi) {
            (2, Some(Epilogue::SwiGlu(out))) => {
                match &w.bias {
                    Some(bias) => b.arg(bias),
                    None => b.arg(&null),
                };
                b.arg(&**out).arg(&null).arg(&null);
            }
            _ => push_bias_outs(&mut b, &w.bias, ys, &null),
        }
        b.arg(&r0).arg(&r1);
        match cnt.as_ref().and_then(|c| c.as_ref()) {
            Some(c) => b.arg(c),
            None => b.arg(&null),
        };
        b.arg(&fi);
        let cfg = LaunchConfig {
            grid_dim: (slices, runs, tok_groups),
            block_dim: block,
            shared_mem_bytes: smem,
        };
        // SAFETY: linear_tck_*_cl(x, q, s, part, M, K, R, slices, rg_run, bias, y, y1, y2, R0, R1,
        // cnt, fuse): x holds m·k f32 (checked by linear_split), q/s the Tc layout of an r × k
        // matrix; the grid covers every row group once; mode 1: the outputs and their row split
        // checked by linear_split (part and cnt null, unread); mode 2: out holds m·I f32
        // ([`tck_cluster`]), part m·r ≤ SK_SCRATCH_FLOATS f32 and cnt TCK_COUNTERS zeros, at
        // least tok_groups·groups/2 (checked above). The grid's x is the cluster's.
        unsafe { b.launch(cfg) }?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::linear_tc::SMEM_MAX;
    use crate::backend::cuda::linear_tcg::tck_smem_bytes;
    use crate::quant::DType;

    /// The cluster entries' mode: 2 to 8 slices (portable clusters) with no epilogue; their
    /// shared memory.
    #[test]
    fn tck_cluster_takes_2_to_8_slices_and_fits_gate_up() {
        assert_eq!(tck_cluster(false, 8, 4, &[128256], 32, None), None);
        assert_eq!(tck_cluster(true, 8, 4, &[128256], 32, None), Some(1));
        assert_eq!(tck_cluster(true, 8, 2, &[14336, 14336], 9, None), Some(1));
        assert_eq!(tck_cluster(true, 8, 8, &[4096], 32, None), Some(1));
        // 16 slices need a non-portable cluster; 1 has nothing to reduce.
        assert_eq!(tck_cluster(true, 8, 16, &[4096], 32, None), None);
        assert_eq!(tck_cluster(true, 16, 16, &[4096], 32, None), Some(1));
        assert_eq!(tck_cluster(true, 8, 1, &[4096], 32, None), None);
        // The slots: 8 KiB a warpgroup at 32 tokens, and two mbarriers.
        assert_eq!(tck_cl_smem_bytes(32, 3), 3 * (8192 + 16) + 16);
        assert_eq!(tck_cl_smem_bytes(16, 1), 4096 + 16 + 16);
        // gate+up at the H200 defaults (K = 4,096 in 4 slices: 32 units, 2 parts, 3 warpgroups)
        // fits with the cluster's 6-unit rings, not with the plain form's 8.
        let base = |st| tck_smem_bytes(DType::BF16, 2, 32, 32, 3, st);
        assert!(base(6) + tck_cl_smem_bytes(32, 3) <= SMEM_MAX);
        assert!(base(8) + tck_cl_smem_bytes(32, 3) > SMEM_MAX);
    }
}
