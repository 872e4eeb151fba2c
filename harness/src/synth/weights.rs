//! Which tensors a synthetic checkpoint holds, and their bytes.
//!
//! Every value comes from a counter-based generator: draw `n` of tensor `name` is splitmix64's
//! finalizer of `key + n * golden` with `key` a hash of `(seed, name)`; float element `i` is the
//! 16-bit lane `i % 4` of draw `i / 4`, quant block `b` uses draws `64 b ..`. So any chunk of any
//! tensor can be generated on any thread in any order and the file is the same bytes for a given
//! seed whatever the thread count. The key hashes the canonical (GGUF) tensor
//! name, and element `i` is the element's index in HF's layout, so the GGUF and safetensors
//! checkpoints of one seed at a float dtype are the same model: llama's Q/K rows are permuted for
//! GGUF exactly as llama.cpp's converter does, and Gemma's norms hold `1 + w` in GGUF and `w` in
//! HF layout.

use super::shapes::Shape;
use super::{Format, SynthDType};
use half::{bf16, f16};
use memra_engine::models::Arch;
use memra_engine::quant::DType;
use rayon::prelude::*;
use std::ops::Range;

/// Standard deviation of every random matrix and bias (uniform distribution), as in HF's
/// `initializer_range`.
pub const WEIGHT_STD: f32 = 0.02;

/// How a tensor's values are made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Uniform with mean 0 and this standard deviation.
    Uniform(f32),
    /// Every element this value (norm weights).
    Const(f32),
}

/// One tensor of the checkpoint, with the element type it is stored in.
#[derive(Debug, Clone)]
pub struct TensorPlan {
    /// Canonical (GGUF) name, e.g. `blk.0.attn_q.weight`; it keys the generator.
    pub gguf_name: String,
    /// HF name, e.g. `model.layers.0.self_attn.q_proj.weight`.
    pub hf_name: String,
    /// Row-major shape, outermost first (`[out_features, in_features]` for a linear weight).
    pub shape: Vec<usize>,
    /// Element type in the file.
    pub dtype: DType,
    /// Float values are rounded to this type first (so a GGUF F32 norm or bias holds exactly the
    /// value the bf16 safetensors checkpoint holds).
    pub base: DType,
    pub init: Init,
    /// For llama's Q/K weights in GGUF: the head count whose rows are permuted (see
    /// [`gguf_rope_row`]).
    pub permute_heads: Option<usize>,
}

impl TensorPlan {
    /// Rows (product of all but the innermost dimension) and row length.
    pub fn rows_cols(&self) -> (usize, usize) {
        let cols = *self.shape.last().expect("non-empty shape");
        (self.shape.iter().product::<usize>() / cols, cols)
    }
    /// Bytes of one row in [`TensorPlan::dtype`].
    pub fn row_bytes(&self) -> usize {
        self.dtype
            .bytes_for(self.rows_cols().1)
            .expect("row length checked when planned")
    }
    /// Bytes of the whole tensor.
    pub fn bytes(&self) -> u64 {
        self.rows_cols().0 as u64 * self.row_bytes() as u64
    }
}

/// The storage type of a 2-D weight in a `dtype` checkpoint with rows of `cols` elements: K-quants
/// need rows of whole 256-element super-blocks, so such rows fall back the way llama.cpp's
/// quantizer does (Q4_K → Q5_0, Q6_K → Q8_0).
pub fn matrix_dtype(dtype: SynthDType, cols: usize) -> DType {
    let want = dtype.dtype();
    if cols.is_multiple_of(want.block_elems()) {
        return want;
    }
    match want {
        DType::Q4_K => DType::Q5_0,
        _ => DType::Q8_0,
    }
}

/// Collects [`TensorPlan`]s with the format's storage rules.
struct Planner {
    gguf: bool,
    dtype: SynthDType,
    base: DType,
    out: Vec<TensorPlan>,
}

impl Planner {
    /// A 2-D weight `[rows, cols]`: quantized in GGUF when the dtype is a quant type.
    fn matrix(&mut self, g: String, hf: String, rows: usize, cols: usize, permute: Option<usize>) {
        self.out.push(TensorPlan {
            gguf_name: g,
            hf_name: hf,
            shape: vec![rows, cols],
            dtype: if self.gguf {
                matrix_dtype(self.dtype, cols)
            } else {
                self.base
            },
            base: self.base,
            init: Init::Uniform(WEIGHT_STD),
            permute_heads: permute,
        });
    }
    /// A norm weight or bias: F32 in GGUF (as llama.cpp's converter writes them), the checkpoint's
    /// dtype in safetensors.
    fn vector(&mut self, g: String, hf: String, len: usize, init: Init) {
        self.out.push(TensorPlan {
            gguf_name: g,
            hf_name: hf,
            shape: vec![len],
            dtype: if self.gguf { DType::F32 } else { self.base },
            base: self.base,
            init,
            permute_heads: None,
        });
    }
}

/// Every tensor of `shape` in file order (embedding, layers, final norm, LM head unless tied),
/// for `format` at `dtype`.
pub fn plan(shape: &Shape, format: Format, dtype: SynthDType) -> Vec<TensorPlan> {
    let gguf = format == Format::Gguf;
    let (arch, h, hd, inter) = (shape.arch, shape.hidden, shape.head_dim, shape.intermediate);
    let gemma = arch == Arch::Gemma3;
    let mut p = Planner {
        gguf,
        dtype,
        base: match dtype {
            SynthDType::F16 => DType::F16,
            _ => DType::BF16,
        },
        out: Vec::new(),
    };
    // Norm weights are 1 everywhere, i.e. Gemma's `w` is 0 (HF computes `1 + w`; GGUF stores it).
    let norm = Init::Const(if gemma && !gguf { 0.0 } else { 1.0 });
    let bias = Init::Uniform(WEIGHT_STD);
    let (q_out, kv_out) = (shape.heads * hd, shape.kv_heads * hd);
    // llama.cpp permutes llama's Q/K rows for its adjacent-pair RoPE (float dtypes only: permuting
    // random quant codes would change nothing).
    let permute = |n| (gguf && arch == Arch::Llama && dtype.is_float()).then_some(n);
    let s = String::from;
    p.matrix(
        s("token_embd.weight"),
        s("model.embed_tokens.weight"),
        shape.vocab,
        h,
        None,
    );
    for i in 0..shape.layers {
        let g = |x: &str| format!("blk.{i}.{x}");
        let hf = |x: &str| format!("model.layers.{i}.{x}");
        p.vector(g("attn_norm.weight"), hf("input_layernorm.weight"), h, norm);
        let (q, k) = (permute(shape.heads), permute(shape.kv_heads));
        p.matrix(
            g("attn_q.weight"),
            hf("self_attn.q_proj.weight"),
            q_out,
            h,
            q,
        );
        p.matrix(
            g("attn_k.weight"),
            hf("self_attn.k_proj.weight"),
            kv_out,
            h,
            k,
        );
        p.matrix(
            g("attn_v.weight"),
            hf("self_attn.v_proj.weight"),
            kv_out,
            h,
            None,
        );
        if arch == Arch::Qwen2 {
            p.vector(g("attn_q.bias"), hf("self_attn.q_proj.bias"), q_out, bias);
            p.vector(g("attn_k.bias"), hf("self_attn.k_proj.bias"), kv_out, bias);
            p.vector(g("attn_v.bias"), hf("self_attn.v_proj.bias"), kv_out, bias);
        }
        if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
            p.vector(
                g("attn_q_norm.weight"),
                hf("self_attn.q_norm.weight"),
                hd,
                norm,
            );
            p.vector(
                g("attn_k_norm.weight"),
                hf("self_attn.k_norm.weight"),
                hd,
                norm,
            );
        }
        p.matrix(
            g("attn_output.weight"),
            hf("self_attn.o_proj.weight"),
            h,
            q_out,
            None,
        );
        if gemma {
            let (post, pre) = (
                "post_attention_layernorm.weight",
                "pre_feedforward_layernorm.weight",
            );
            p.vector(g("post_attention_norm.weight"), hf(post), h, norm);
            p.vector(g("ffn_norm.weight"), hf(pre), h, norm);
        } else {
            p.vector(
                g("ffn_norm.weight"),
                hf("post_attention_layernorm.weight"),
                h,
                norm,
            );
        }
        p.matrix(
            g("ffn_gate.weight"),
            hf("mlp.gate_proj.weight"),
            inter,
            h,
            None,
        );
        p.matrix(g("ffn_up.weight"), hf("mlp.up_proj.weight"), inter, h, None);
        p.matrix(
            g("ffn_down.weight"),
            hf("mlp.down_proj.weight"),
            h,
            inter,
            None,
        );
        if gemma {
            let post = "post_feedforward_layernorm.weight";
            p.vector(g("post_ffw_norm.weight"), hf(post), h, norm);
        }
    }
    p.vector(s("output_norm.weight"), s("model.norm.weight"), h, norm);
    if !shape.tied {
        p.matrix(
            s("output.weight"),
            s("lm_head.weight"),
            shape.vocab,
            h,
            None,
        );
    }
    p.out
}

/// The HF row that llama.cpp's converter stores at GGUF row `r` of a Q or K weight with `heads`
/// heads of `head_dim` rows: within a head, GGUF row `2i + j` is HF row `j * head_dim/2 + i`
/// (`reshape(heads, 2, head_dim/2, cols).swapaxes(1, 2)`).
pub fn gguf_rope_row(r: usize, head_dim: usize) -> usize {
    let (h, rem) = (r / head_dim, r % head_dim);
    h * head_dim + (rem % 2) * (head_dim / 2) + rem / 2
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's finalizer: a bijective 64-bit mix.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draw number `counter` of the stream `key`.
#[inline(always)]
pub fn draw(key: u64, counter: u64) -> u64 {
    mix64(key.wrapping_add(counter.wrapping_mul(GOLDEN)))
}

/// The generator key of tensor `name` under `seed` (FNV-1a of the name, mixed with the seed).
pub fn tensor_key(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01B3);
    }
    mix64(seed ^ mix64(h))
}

/// Uniform in [0, 1) from the top 24 bits.
#[inline(always)]
fn unit01(bits: u64) -> f32 {
    (bits >> 40) as f32 * (1.0 / 16_777_216.0)
}

/// Fills `out` with rows `rows` of `t` (exactly `rows.len() * t.row_bytes()` bytes), splitting
/// the work across the rayon pool. Deterministic: the bytes depend only on `t`, `key` and `rows`.
pub fn fill_rows(t: &TensorPlan, key: u64, rows: Range<usize>, out: &mut [u8]) {
    let rb = t.row_bytes();
    assert_eq!(
        out.len(),
        rows.len() * rb,
        "buffer size for {}",
        t.gguf_name
    );
    // Pieces of at least 64 KiB keep rayon's per-task cost negligible.
    let per_task = (65536 / rb).max(1);
    out.par_chunks_mut(per_task * rb)
        .enumerate()
        .for_each(|(i, piece)| {
            let r0 = rows.start + i * per_task;
            for (j, row) in piece.chunks_exact_mut(rb).enumerate() {
                fill_row(t, key, r0 + j, row);
            }
        });
}

fn fill_row(t: &TensorPlan, key: u64, r: usize, out: &mut [u8]) {
    let (_, cols) = t.rows_cols();
    if t.dtype.block_elems() > 1 {
        let be = t.dtype.block_elems();
        let bb = t.dtype.block_bytes();
        let first = (r * (cols / be)) as u64;
        for (b, block) in out.chunks_exact_mut(bb).enumerate() {
            quant_block(t.dtype, key, first + b as u64, block);
        }
        return;
    }
    let src_row = match t.permute_heads {
        Some(heads) => gguf_rope_row(r, t.shape[0] / heads),
        None => r,
    };
    // Four elements per draw, 16 bits each: element i of the tensor (in HF order) is lane i % 4
    // of draw i / 4. Rows hold a multiple of 4 elements, so a row starts a draw.
    assert!(cols.is_multiple_of(4), "{}: row length {cols}", t.gguf_name);
    let first_draw = (src_row * cols / 4) as u64;
    let to_bf16 = |x: f32| bf16::from_f32(x).to_f32();
    let to_f16 = |x: f32| f16::from_f32(x).to_f32();
    let same = |x: f32| x;
    let (init, base) = (t.init, t.base);
    match (t.dtype, base) {
        (DType::BF16, _) => put_floats(out, init, key, first_draw, same, |x| {
            bf16::from_f32(x).to_le_bytes()
        }),
        (DType::F16, _) => put_floats(out, init, key, first_draw, same, |x| {
            f16::from_f32(x).to_le_bytes()
        }),
        (DType::F32, DType::F16) => {
            put_floats(out, init, key, first_draw, to_f16, |x| x.to_le_bytes())
        }
        (DType::F32, _) => put_floats(out, init, key, first_draw, to_bf16, |x| x.to_le_bytes()),
        (other, _) => unreachable!("{} is not a plain float type", other.name()),
    }
}

/// Writes a row of `init` values, rounded by `round` (to the base type, when the stored type is
/// wider) and encoded in `E` bytes each, over `out`.
#[inline(always)]
fn put_floats<const E: usize>(
    out: &mut [u8],
    init: Init,
    key: u64,
    first_draw: u64,
    round: impl Fn(f32) -> f32,
    encode: impl Fn(f32) -> [u8; E],
) {
    match init {
        Init::Const(v) => {
            let b = encode(round(v));
            for o in out.chunks_exact_mut(E) {
                o.copy_from_slice(&b);
            }
        }
        Init::Uniform(std) => {
            // Uniform on 65536 levels: finer than bf16 or f16 can tell apart.
            let scale = std * 3f32.sqrt();
            for (g, o) in out.chunks_exact_mut(4 * E).enumerate() {
                let bits = draw(key, first_draw + g as u64);
                for k in 0..4 {
                    let lane = ((bits >> (16 * k)) & 0xFFFF) as f32;
                    let x = ((lane + 0.5) * (2.0 / 65536.0) - 1.0) * scale;
                    o[k * E..k * E + E].copy_from_slice(&encode(round(x)));
                }
            }
        }
    }
}

/// Draws per quant block (a stride in the counter space; every block uses fewer).
const BLOCK_DRAWS: u64 = 64;

/// One block of random quant codes with scales chosen so the dequantized values have mean ~0 and
/// standard deviation ~[`WEIGHT_STD`]. Every f16 scale is a finite normal number.
fn quant_block(dtype: DType, key: u64, block: u64, out: &mut [u8]) {
    let mut ctr = block * BLOCK_DRAWS;
    let mut next = || {
        ctr += 1;
        draw(key, ctr - 1)
    };
    // The scale varies by ±25% between blocks, as real scales do.
    let jitter = 0.75 + 0.5 * unit01(next());
    let random_bytes = |next: &mut dyn FnMut() -> u64, dst: &mut [u8]| {
        for c in dst.chunks_mut(8) {
            let b = next().to_le_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
    };
    let put_f16 = |dst: &mut [u8], v: f32| dst.copy_from_slice(&f16::from_f32(v).to_le_bytes());
    // Standard deviations of the integer codes: uniform over n values has sd sqrt((n²-1)/12).
    let sd = |n: f32| ((n * n - 1.0) / 12.0).sqrt();
    match dtype {
        DType::Q8_0 => {
            // d * q, q uniform i8.
            put_f16(&mut out[0..2], jitter * WEIGHT_STD / sd(256.0));
            random_bytes(&mut next, &mut out[2..34]);
        }
        DType::Q5_0 => {
            // d * (q - 16), q uniform 0..32.
            put_f16(&mut out[0..2], jitter * WEIGHT_STD / sd(32.0));
            random_bytes(&mut next, &mut out[2..22]);
        }
        DType::Q4_K => {
            // (d * sc) * q - dmin * m with q uniform 0..16: m = sc and dmin = 7.5 d centre it.
            let mut sc = [0u8; 8];
            let r = next().to_le_bytes();
            for j in 0..8 {
                sc[j] = 32 + (r[j] & 31);
            }
            let rms_sc = (sc.iter().map(|&s| (s as f32).powi(2)).sum::<f32>() / 8.0).sqrt();
            let d = f16::from_f32(jitter * WEIGHT_STD / (rms_sc * sd(16.0)));
            out[0..2].copy_from_slice(&d.to_le_bytes());
            put_f16(&mut out[2..4], d.to_f32() * 7.5);
            let mn = sc;
            let s = &mut out[4..16];
            for j in 0..4 {
                s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
                s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6);
                s[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
            }
            random_bytes(&mut next, &mut out[16..144]);
        }
        DType::Q6_K => {
            // d * sc * (q - 32), q uniform 0..64, 16 signed 8-bit scales of magnitude 8..15.
            random_bytes(&mut next, &mut out[0..192]);
            let r = [next().to_le_bytes(), next().to_le_bytes()];
            let mut sum_sq = 0.0;
            for j in 0..16 {
                let b = r[j / 8][j % 8];
                let mag = 8 + (b & 7) as i8;
                let s = if b & 0x80 != 0 { -mag } else { mag };
                sum_sq += (s as f32).powi(2);
                out[192 + j] = s as u8;
            }
            let rms_sc = (sum_sq / 16.0).sqrt();
            put_f16(
                &mut out[208..210],
                jitter * WEIGHT_STD / (rms_sc * sd(64.0)),
            );
        }
        other => unreachable!("no random-code generator for {}", other.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memra_engine::quant::dequantize_row;

    fn plan_of(dtype: DType, rows: usize, cols: usize) -> TensorPlan {
        TensorPlan {
            gguf_name: "t".into(),
            hf_name: "t".into(),
            shape: vec![rows, cols],
            dtype,
            base: DType::BF16,
            init: Init::Uniform(WEIGHT_STD),
            permute_heads: None,
        }
    }

    fn generate(t: &TensorPlan, chunk_rows: usize) -> Vec<u8> {
        let (rows, _) = t.rows_cols();
        let mut all = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + chunk_rows).min(rows);
            let mut buf = vec![0u8; (r1 - r0) * t.row_bytes()];
            fill_rows(t, 7, r0..r1, &mut buf);
            all.extend_from_slice(&buf);
            r0 = r1;
        }
        all
    }

    #[test]
    fn every_type_dequantizes_to_finite_values_of_the_intended_spread() {
        for dtype in [
            DType::BF16,
            DType::F16,
            DType::F32,
            DType::Q8_0,
            DType::Q5_0,
            DType::Q4_K,
            DType::Q6_K,
        ] {
            let t = plan_of(dtype, 64, 512);
            let bytes = generate(&t, 64);
            let mut v = vec![0f32; 64 * 512];
            dequantize_row(dtype, &bytes, &mut v);
            assert!(v.iter().all(|x| x.is_finite()), "{}", dtype.name());
            let n = v.len() as f64;
            let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
            let sd = (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
            assert!(mean.abs() < 1e-3, "{} mean {mean}", dtype.name());
            assert!((0.017..0.023).contains(&sd), "{} sd {sd}", dtype.name());
        }
    }

    #[test]
    fn bytes_do_not_depend_on_chunking() {
        for dtype in [DType::BF16, DType::Q4_K, DType::Q6_K] {
            let t = plan_of(dtype, 40, 256);
            assert_eq!(generate(&t, 40), generate(&t, 3), "{}", dtype.name());
            assert_eq!(generate(&t, 1), generate(&t, 7), "{}", dtype.name());
        }
    }

    #[test]
    fn rope_permutation_matches_llama_cpp() {
        // reshape(heads, 2, hd/2).swapaxes(1, 2): for hd = 8, GGUF rows 0..8 are HF rows
        // 0, 4, 1, 5, 2, 6, 3, 7.
        let got: Vec<usize> = (0..16).map(|r| gguf_rope_row(r, 8)).collect();
        assert_eq!(got, [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]);
    }
}
