//! The quantization trait under every linear layer: a weight matrix `[rows, cols]` (rows = output
//! features, cols = input features, row-major as in GGUF `ne = [cols, rows]` and safetensors
//! `[rows, cols]`) that multiplies activations by dequantizing on the fly.
//!
//! Reduction order (the exactness contract, DESIGN.md §3): each output element is
//! `dot(W[r, :], x)` accumulated over k = 0..cols into 8 lanes (lane = k mod 8) in increasing k,
//! then combined as `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`. It depends on nothing but `cols`, so
//! a row's result is identical for any thread count, batch size or position in the batch.

use super::{dequantize_row, DType};
use memmap2::Mmap;
use std::ops::Range;
use std::sync::Arc;

/// Bytes of a tensor: a window of a memory-mapped file or an owned buffer.
#[derive(Clone)]
pub enum Storage {
    /// `bytes` range of a shared memory map.
    Mapped(Arc<Mmap>, Range<usize>),
    /// Owned bytes.
    Owned(Arc<Vec<u8>>),
}

impl Storage {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m, r) => &m[r.clone()],
            Storage::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes)", self.bytes().len())
    }
}

/// A weight matrix behind any element type. Model code calls only this trait, so it never branches
/// on the format.
pub trait QuantMatrix: Send + Sync {
    /// Output features.
    fn rows(&self) -> usize;
    /// Input features (the reduction length).
    fn cols(&self) -> usize;
    /// Element type of the stored weights.
    fn dtype(&self) -> DType;
    /// Raw stored bytes (row-major, `rows * dtype.bytes_for(cols)`), for backends that upload them.
    fn raw(&self) -> &[u8];
    /// Dequantizes row `r` into `out` (`cols` f32 values).
    fn row_into(&self, r: usize, out: &mut [f32]);
    /// `out[t * n + (r - rows.start)] = dot(W[r, :], x[t * cols .. (t+1) * cols])` for every token
    /// `t` of `x` (`x.len() = T * cols`) and every `r` in `rows` (`n = rows.len()`), in the fixed
    /// reduction order of this module.
    fn matmul_rows(&self, x: &[f32], rows: Range<usize>, out: &mut [f32]);
}

/// The one implementation: any [`DType`] over a [`Storage`].
pub struct BlockMatrix {
    dtype: DType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: Storage,
}

/// Wraps `data` as a `[rows, cols]` matrix of `dtype`. Errors (as a message for the caller to attach
/// a file name to) when `cols` is not a whole number of blocks or the byte count is wrong.
pub fn quant_matrix(
    dtype: DType,
    rows: usize,
    cols: usize,
    data: Storage,
) -> Result<Arc<dyn QuantMatrix>, String> {
    let row_bytes = dtype.bytes_for(cols).ok_or_else(|| {
        format!(
            "{} cols is not a multiple of the {} block size {}",
            cols,
            dtype.name(),
            dtype.block_elems()
        )
    })?;
    let want = row_bytes.checked_mul(rows).ok_or("size overflow")?;
    if data.bytes().len() != want {
        return Err(format!(
            "{} [{rows}, {cols}] needs {want} bytes, found {}",
            dtype.name(),
            data.bytes().len()
        ));
    }
    Ok(Arc::new(BlockMatrix {
        dtype,
        rows,
        cols,
        row_bytes,
        data,
    }))
}

/// The fixed-order dot product of this module (see the module docs).
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    accumulate(&mut lanes, a, b);
    combine(&lanes)
}

#[inline(always)]
fn accumulate(lanes: &mut [f32; 8], a: &[f32], b: &[f32]) {
    debug_assert_eq!(a.len(), b.len());
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (ca, cb) in ca.zip(cb) {
        for l in 0..8 {
            lanes[l] += ca[l] * cb[l];
        }
    }
    for (l, (x, y)) in ra.iter().zip(rb).enumerate() {
        lanes[l] += x * y;
    }
}

/// [`accumulate`] for two tokens sharing the weights `w`: the same per-lane operations, in the
/// same order, for each.
#[inline(always)]
fn accumulate2(l0: &mut [f32; 8], l1: &mut [f32; 8], w: &[f32], a: &[f32], b: &[f32]) {
    let (cw, ca, cb) = (w.chunks_exact(8), a.chunks_exact(8), b.chunks_exact(8));
    let (rw, ra, rb) = (cw.remainder(), ca.remainder(), cb.remainder());
    for ((cw, ca), cb) in cw.zip(ca).zip(cb) {
        for l in 0..8 {
            l0[l] += cw[l] * ca[l];
            l1[l] += cw[l] * cb[l];
        }
    }
    for (l, ((w, x), y)) in rw.iter().zip(ra).zip(rb).enumerate() {
        l0[l] += w * x;
        l1[l] += w * y;
    }
}

/// [`accumulate`] for four tokens sharing the weights `w` (a speculative verify's rows): the
/// same per-lane operations, in the same order, for each; four independent add chains per weight
/// load instead of two.
#[inline(always)]
fn accumulate4(l: &mut [[f32; 8]], w: &[f32], x: [&[f32]; 4]) {
    let [l0, l1, l2, l3] = l else {
        unreachable!("accumulate4 takes four tokens' lanes")
    };
    let cw = w.chunks_exact(8);
    let c = x.map(|x| x.chunks_exact(8));
    let rw = cw.remainder();
    let r = [
        c[0].remainder(),
        c[1].remainder(),
        c[2].remainder(),
        c[3].remainder(),
    ];
    let [c0, c1, c2, c3] = c;
    for ((((cw, a), b), c), d) in cw.zip(c0).zip(c1).zip(c2).zip(c3) {
        for j in 0..8 {
            l0[j] += cw[j] * a[j];
            l1[j] += cw[j] * b[j];
            l2[j] += cw[j] * c[j];
            l3[j] += cw[j] * d[j];
        }
    }
    for (j, w) in rw.iter().enumerate() {
        l0[j] += w * r[0][j];
        l1[j] += w * r[1][j];
        l2[j] += w * r[2][j];
        l3[j] += w * r[3][j];
    }
}

#[inline(always)]
fn combine(l: &[f32; 8]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

/// Dequantized chunk length: a multiple of every block size (32, 256), small enough for L1.
const CHUNK: usize = 256;

impl QuantMatrix for BlockMatrix {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn raw(&self) -> &[u8] {
        self.data.bytes()
    }

    fn row_into(&self, r: usize, out: &mut [f32]) {
        let b = &self.data.bytes()[r * self.row_bytes..(r + 1) * self.row_bytes];
        dequantize_row(self.dtype, b, &mut out[..self.cols]);
    }

    fn matmul_rows(&self, x: &[f32], rows: Range<usize>, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c") {
                // SAFETY: the CPU supports AVX2 and F16C (checked above).
                return unsafe { self.matmul_rows_avx2(x, rows, out) };
            }
        }
        self.matmul_rows_portable(x, rows, out)
    }
}

impl BlockMatrix {
    /// The same code compiled for AVX2: wider vectors, same per-lane operations and no FMA
    /// contraction, so results are bit-identical to the portable build.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn matmul_rows_avx2(&self, x: &[f32], rows: Range<usize>, out: &mut [f32]) {
        self.matmul_rows_body(x, rows, out)
    }

    fn matmul_rows_portable(&self, x: &[f32], rows: Range<usize>, out: &mut [f32]) {
        self.matmul_rows_body(x, rows, out)
    }

    #[inline(always)]
    fn matmul_rows_body(&self, x: &[f32], rows: Range<usize>, out: &mut [f32]) {
        let cols = self.cols;
        let t_count = x.len() / cols;
        let n = rows.len();
        debug_assert_eq!(out.len(), t_count * n);
        let bytes = self.data.bytes();
        let mut buf = [0f32; CHUNK];
        let mut lanes = vec![[0f32; 8]; t_count];
        // Elements per CHUNK of dequantized values, and the bytes they take.
        let be = self.dtype.block_elems();
        let bb = self.dtype.block_bytes();
        for (i, r) in rows.enumerate() {
            let row = &bytes[r * self.row_bytes..(r + 1) * self.row_bytes];
            lanes.iter_mut().for_each(|l| *l = [0f32; 8]);
            let mut k = 0;
            while k < cols {
                let len = CHUNK.min(cols - k);
                let src = &row[k / be * bb..(k + len) / be * bb];
                dequantize_row(self.dtype, src, &mut buf[..len]);
                let w = &buf[..len];
                // k is a multiple of CHUNK (so of 8): lane = (k + j) mod 8 = j mod 8. Tokens go in
                // fours, then a pair, then one, so each dequantized weight load serves several;
                // every token's lanes see the same operations in the same order either way.
                let xs = |t: usize| &x[t * cols + k..t * cols + k + len];
                let mut quads = lanes.chunks_exact_mut(4);
                for (q, l) in quads.by_ref().enumerate() {
                    let t = 4 * q;
                    accumulate4(l, w, [xs(t), xs(t + 1), xs(t + 2), xs(t + 3)]);
                }
                let rest = quads.into_remainder();
                let t0 = t_count - rest.len();
                let mut pairs = rest.chunks_exact_mut(2);
                if let Some(l) = pairs.next() {
                    let (l0, l1) = l.split_at_mut(1);
                    accumulate2(&mut l0[0], &mut l1[0], w, xs(t0), xs(t0 + 1));
                }
                if let [l] = pairs.into_remainder() {
                    accumulate(l, w, xs(t_count - 1));
                }
                k += len;
            }
            for (t, l) in lanes.iter().enumerate() {
                out[t * n + i] = combine(l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A row's output has the same bits whatever the number of tokens in the pass (so whichever
    /// of the 4-, 2- and 1-token paths computes it), for a K that is not a multiple of CHUNK.
    #[test]
    fn matmul_rows_is_independent_of_the_token_count() {
        let (rows, cols) = (5usize, 2 * CHUNK + 40);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let w: Vec<u8> = (0..rows * cols)
            .flat_map(|_| next().to_le_bytes())
            .collect();
        let m =
            quant_matrix(DType::F32, rows, cols, Storage::Owned(Arc::new(w))).expect("f32 matrix");
        let tokens = 11;
        let x: Vec<f32> = (0..tokens * cols).map(|_| next()).collect();
        let mut solo = vec![0f32; tokens * rows];
        for t in 0..tokens {
            m.matmul_rows(
                &x[t * cols..(t + 1) * cols],
                0..rows,
                &mut solo[t * rows..][..rows],
            );
        }
        for t_count in [2, 3, 4, 5, 7, 8, 11] {
            let mut out = vec![0f32; t_count * rows];
            m.matmul_rows(&x[..t_count * cols], 0..rows, &mut out);
            for (i, (a, b)) in out.iter().zip(&solo).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{t_count} tokens, output {i}");
            }
        }
        // And the values are the dot products (to f32 rounding).
        let mut wrow = vec![0f32; cols];
        m.row_into(3, &mut wrow);
        let exact: f64 = wrow
            .iter()
            .zip(&x[2 * cols..3 * cols])
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        assert!(
            (f64::from(solo[2 * rows + 3]) - exact).abs() < 1e-4,
            "{exact}"
        );
    }
}
