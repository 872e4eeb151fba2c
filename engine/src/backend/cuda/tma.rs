//! Tensor maps for the wgmma GEMM's tensor copies (TCW_TMA = 1, kernels/linear_tcw.cu): 3-D
//! tiled maps over the layouts `linear_tcw_*` reads, one box a unit and operand, encoded by
//! `cuTensorMapEncodeTiled` (CUDA Driver API, "Tensor Map Object Management"; the copies are PTX
//! ISA's `cp.async.bulk.tensor`, tiled mode, no swizzle, no interleave).

use super::drv;
use crate::error::{Error, Result};
use crate::quant::DType;
use cudarc::driver::sys;

/// One 3-D tiled tensor map over 8-byte elements: element (e, v, i) lies `i · strides[1] +
/// v · strides[0] + 8 e` bytes from the base (e < dims[0], v < dims[1], i < dims[2]); a box of
/// `boxd` elements lands in shared memory densely, e fastest, then v, then i. Parts of a box past
/// `dims` are zero-filled and still count their bytes on the copy's barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapShape {
    pub dims: [u64; 3],
    pub strides: [u64; 2],
    pub boxd: [u32; 3],
}

impl MapShape {
    /// `count` runs of `nu` chunks of `chunk` bytes (chunk (i, v) at `(i · nu + v) · chunk`), a
    /// box taking one chunk of `boxn` runs.
    fn chunks(chunk: u64, nu: u64, count: u64, boxn: u32) -> MapShape {
        MapShape {
            dims: [chunk / 8, nu, count],
            strides: [chunk, nu * chunk],
            boxd: [(chunk / 8) as u32, 1, boxn],
        }
    }

    /// Bytes of one box (what one copy completes on its barrier).
    pub fn box_bytes(&self) -> u64 {
        8 * self.boxd.iter().map(|&b| b as u64).product::<u64>()
    }
}

/// The maps of one `linear_tcw_*` launch, in the entry's parameter order: x (`tcw_split_x`'s
/// `[ntb token blocks][k / 32 units][parts · 512 bytes]`, a box of the block's 16 token blocks,
/// 8 with `cluster`), the weights (`[tiles][k / 32][wb]`, wb 1,024 BF16, 512 Q8_0, 256 Q4_K; a
/// box of the block's `4 · wg` row tiles), their scales (Q8_0, Q4_K: 32 bytes a (tile, unit)) and
/// Q4_K's unit sums of x (`[k / 32][ld]` f32; a box of 128 tokens). `None` where the format has
/// no such operand. Errors: another format.
#[allow(clippy::too_many_arguments)]
pub fn tcw_map_shapes(
    dtype: DType,
    parts: u32,
    wg: u32,
    cluster: bool,
    k: usize,
    ntb: usize,
    tiles: usize,
    ld: usize,
) -> Result<[Option<MapShape>; 4]> {
    let nu = (k / 32) as u64;
    let wb = match dtype {
        DType::BF16 => 1024,
        DType::Q8_0 => 512,
        DType::Q4_K => 256,
        d => return Err(Error::Unsupported(format!("tensor maps for {}", d.name()))),
    };
    let rows = 4 * wg;
    let x = MapShape::chunks(
        parts as u64 * 512,
        nu,
        ntb as u64,
        if cluster { 8 } else { 16 },
    );
    let w = MapShape::chunks(wb, nu, tiles as u64, rows);
    let s = (dtype != DType::BF16).then(|| MapShape::chunks(32, nu, tiles as u64, rows));
    let xsum = (dtype == DType::Q4_K).then(|| MapShape {
        dims: [ld as u64 / 2, nu, 1],
        strides: [ld as u64 * 4, ld as u64 * 4 * nu],
        boxd: [64, 1, 1],
    });
    Ok([Some(x), Some(w), s, xsum])
}

/// Encodes `shape` over device memory at `ptr` (16-byte aligned). Errors: the driver's, naming
/// the shape (a stride not a multiple of 16, a box dimension above 256, a bad address).
pub fn encode(ptr: u64, shape: &MapShape) -> Result<sys::CUtensorMap> {
    use sys::*;
    // SAFETY: a zeroed map is a valid value of this plain C struct, overwritten by the call.
    let mut map: CUtensorMap = unsafe { std::mem::zeroed() };
    let es = [1u32; 3];
    // SAFETY: every array has the rank's length (strides: rank - 1); `map` outlives the call.
    unsafe {
        cuTensorMapEncodeTiled(
            &mut map,
            CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT64,
            3,
            ptr as *mut std::ffi::c_void,
            shape.dims.as_ptr(),
            shape.strides.as_ptr(),
            shape.boxd.as_ptr(),
            es.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|e| Error::Unsupported(format!("tensor map {shape:?}: {}", drv(e))))?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte offset of element (e, v, i).
    fn at(s: &MapShape, e: u64, v: u64, i: u64) -> u64 {
        i * s.strides[1] + v * s.strides[0] + 8 * e
    }

    /// The maps address what the kernel's 1-D copies read (kernels/linear_tcw.cu, bulk_load),
    /// their boxes sum to a stage's bytes (`tcw_smem_bytes` less the slice totals and barriers),
    /// and every dimension meets the driver's limits (box ≤ 256, strides multiples of 16).
    #[test]
    fn maps_follow_the_kernel_layout() {
        let (k, ntb, tiles, ld) = (4096usize, 128usize, 1792usize, 1024usize);
        let nu = (k / 32) as u64;
        for (dtype, wb) in [
            (DType::BF16, 1024u64),
            (DType::Q8_0, 512),
            (DType::Q4_K, 256),
        ] {
            for (parts, wg, cluster) in [(2u32, 2u32, false), (3, 2, false), (2, 2, true)] {
                let m = tcw_map_shapes(dtype, parts, wg, cluster, k, ntb, tiles, ld).unwrap();
                let (x, w) = (m[0].unwrap(), m[1].unwrap());
                // x: token block tb, unit u at ((tb · nu + u) · parts · 512).
                let xb = parts as u64 * 512;
                assert_eq!(at(&x, 0, 5, 7), (7 * nu + 5) * xb);
                assert_eq!(x.box_bytes(), xb * if cluster { 8 } else { 16 });
                // Weights: tile tl, unit u at ((tl · nu + u) · wb); the block's 4 wg tiles a box.
                assert_eq!(at(&w, 3, 9, 11), (11 * nu + 9) * wb + 24);
                assert_eq!(w.box_bytes(), 4 * wg as u64 * wb);
                let mut stage = xb * 16 + w.box_bytes();
                if let Some(s) = m[2] {
                    assert_eq!(at(&s, 1, 2, 3), (3 * nu + 2) * 32 + 8);
                    stage += s.box_bytes();
                }
                if let Some(xs) = m[3] {
                    // Σx of unit u, token 8 tb0 + j at u · ld + 8 tb0 + j f32: coordinate 4 tb0.
                    assert_eq!(at(&xs, 4 * 3, 6, 0), (6 * ld as u64 + 8 * 3) * 4);
                    assert_eq!(xs.box_bytes(), 512);
                    stage += 512;
                }
                assert_eq!(m[2].is_some(), dtype != DType::BF16);
                assert_eq!(m[3].is_some(), dtype == DType::Q4_K);
                let smem = super::super::linear_tcg::tcw_smem_bytes(dtype, parts, wg, 1, true);
                assert_eq!(stage, (smem - 64 * 128 * wg * 4 - 16) as u64, "{dtype:?}");
                for s in m.iter().flatten() {
                    assert!(s.boxd.iter().all(|&b| (1..=256).contains(&b)));
                    assert_eq!(s.boxd[0] * 8 % 16, 0);
                    assert!(s.strides.iter().all(|&st| st % 16 == 0));
                    assert_eq!(s.strides[0], s.dims[0] * 8);
                }
            }
        }
        assert!(tcw_map_shapes(DType::F32, 2, 2, false, k, ntb, tiles, ld).is_err());
    }
}
