//! Quantize an F16/F32 GGML Whisper model the way whisper.cpp's quantize tool
//! does, with ggml's own `ggml_quantize_chunk` for the numbers.
//!
//! Which tensors change is decided by the loader's expectations for the new
//! ftype ([`ExpectedInventory`]): 2-D weight matrices and the token embedding
//! become the target type; conv weights stay F16; conv biases, positional
//! embeddings and 1-D vectors stay F32. That is exactly the quantize tool's
//! "2-D tensors except conv biases and positional embeddings" rule, and it
//! makes the output loadable by construction. Records keep the source order;
//! mel filters and vocabulary are copied byte for byte.

use crate::numbers::{f16_le_to_f32, f32_le_to_f32, f32_to_f16_le, f32_to_le};
use crate::{
    Expect, ExpectedInventory, Ftype, GgmlType, GgmlWriter, Inventory, ParseError, inspect,
};
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Why a quantization failed.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    /// The source is not a strictly valid full model.
    #[error("source {path}: {source}")]
    Source {
        /// The source model's path.
        path: PathBuf,
        /// Why the parser rejected it.
        source: ParseError,
    },
    /// The target is not in `TARGETS`, the source is already quantized, or
    /// the model's dims are not whole blocks of the target; the text says which.
    #[error("{0}")]
    Unsupported(String),
    /// Reading the source or writing the output failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory (for the output, possibly its temporary file).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// ggml's quantizer wrote a payload of the wrong length.
    #[error("ggml wrote {got} bytes for {tensor}, {want} expected")]
    Size {
        /// The tensor's name.
        tensor: String,
        /// Bytes ggml wrote.
        got: usize,
        /// Bytes the target type x dims needs.
        want: u64,
    },
    /// The written output does not parse strictly as a full model; the output
    /// path is left untouched.
    #[error("the quantized output does not parse: {0}")]
    Output(ParseError),
}

/// What a quantization produced.
#[derive(Debug, Clone, Serialize)]
pub struct QuantizeSummary {
    /// The type the weight matrices were quantized to.
    pub target: GgmlType,
    /// The ftype the output's header stores (target plus quantization version).
    pub ftype: Ftype,
    /// Tensors quantized by ggml (weight matrices and the token embedding).
    pub quantized_tensors: usize,
    /// Length of the source model in bytes.
    pub source_bytes: u64,
    /// The output as the strict parser read it back.
    pub output: Inventory,
}

/// The types this tool quantizes to.
pub const TARGETS: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
];

/// Quantize `src` (F16 or F32 weights, all tensors) to `target`, writing
/// `out` atomically once the result has been reparsed strictly.
pub fn quantize(
    src: &Path,
    out: &Path,
    target: GgmlType,
) -> Result<QuantizeSummary, QuantizeError> {
    quantize_as(src, out, target, Expect::Full)
}

/// [`quantize`] for a model of layout `expect`: `Expect::DecoderOnly`
/// quantizes a derived decoder-only artifact, which stays decoder-only.
pub fn quantize_as(
    src: &Path,
    out: &Path,
    target: GgmlType,
    expect: Expect,
) -> Result<QuantizeSummary, QuantizeError> {
    if !TARGETS.contains(&target) {
        return Err(QuantizeError::Unsupported(format!(
            "cannot quantize to {target}: one of q4_0, q5_0, q5_1, q8_0"
        )));
    }
    let source = inspect(src, expect).map_err(|source| QuantizeError::Source {
        path: src.to_path_buf(),
        source,
    })?;
    if source.ftype.weight_type.is_quantized() {
        return Err(QuantizeError::Unsupported(format!(
            "{} is already {}; quantize from an F16 or F32 model",
            src.display(),
            source.ftype.weight_type
        )));
    }
    let ftype = Ftype::for_weight_type(target);
    let hparams = crate::Hparams {
        ftype: ftype.raw,
        ..source.hparams
    };
    let expected = ExpectedInventory::new(&hparams, expect).map_err(|e| {
        QuantizeError::Unsupported(format!("{target} does not fit this model: {e}"))
    })?;

    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| QuantizeError::Io { path, source }
    };
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    let mut input = BufReader::with_capacity(1 << 20, File::open(src).map_err(io(src))?);
    let mut w = GgmlWriter::new(BufWriter::with_capacity(1 << 20, tmp.as_file()));
    w.header(&hparams).map_err(io(tmp.path()))?;
    // Mel filters and vocabulary: the rest of the prefix, verbatim.
    let mut rest = vec![0u8; (source.prefix_len - crate::HEADER_LEN) as usize];
    input
        .seek(SeekFrom::Start(crate::HEADER_LEN))
        .and_then(|_| input.read_exact(&mut rest))
        .map_err(io(src))?;
    w.raw(&rest).map_err(io(tmp.path()))?;

    let mut quantized_tensors = 0;
    for t in &source.tensors {
        let want = expected
            .get(&t.name)
            .ok_or_else(|| QuantizeError::Unsupported(format!("{} is not expected", t.name)))?;
        let mut payload = vec![0u8; t.payload_len as usize];
        input
            .seek(SeekFrom::Start(t.payload_offset))
            .and_then(|_| input.read_exact(&mut payload))
            .map_err(io(src))?;
        let converted = if want.ggml_type == t.ggml_type {
            payload
        } else {
            let values = to_f32(t.ggml_type, &payload)?;
            let bytes = match want.ggml_type {
                GgmlType::F16 => f32_to_f16_le(&values),
                GgmlType::F32 => f32_to_le(&values),
                q => {
                    quantized_tensors += 1;
                    ggml::quantize_rows(q, &values, t.ne[0] as usize)
                }
            };
            let len = want.payload_len().unwrap_or(0);
            if bytes.len() as u64 != len {
                return Err(QuantizeError::Size {
                    tensor: t.name.clone(),
                    got: bytes.len(),
                    want: len,
                });
            }
            bytes
        };
        w.tensor(&t.name, want.ggml_type, &want.ne, &converted)
            .map_err(io(tmp.path()))?;
    }
    w.flush().map_err(io(tmp.path()))?;
    drop(w);
    let output = inspect(tmp.path(), expect).map_err(QuantizeError::Output)?;
    tmp.persist(out).map_err(|e| QuantizeError::Io {
        path: out.to_path_buf(),
        source: e.error,
    })?;
    Ok(QuantizeSummary {
        target,
        ftype,
        quantized_tensors,
        source_bytes: source.file_len,
        output,
    })
}

fn to_f32(ty: GgmlType, payload: &[u8]) -> Result<Vec<f32>, QuantizeError> {
    match ty {
        GgmlType::F16 => Ok(f16_le_to_f32(payload)),
        GgmlType::F32 => Ok(f32_le_to_f32(payload)),
        other => Err(QuantizeError::Unsupported(format!(
            "cannot re-quantize a {other} tensor"
        ))),
    }
}

/// The FFI boundary: ggml's reference quantizer, as linked into whisper-rs.
mod ggml {
    use crate::GgmlType;
    use whisper_rs::whisper_rs_sys as sys;

    /// Quantize whole rows of `n_per_row` values to `ty`.
    pub fn quantize_rows(ty: GgmlType, values: &[f32], n_per_row: usize) -> Vec<u8> {
        let ty_id = ty.id() as sys::ggml_type;
        let nrows = values.len() / n_per_row.max(1);
        // SAFETY: ggml_row_size only reads its arguments.
        let row = unsafe { sys::ggml_row_size(ty_id, n_per_row as i64) };
        let mut out = vec![0u8; row * nrows];
        // SAFETY: `values` holds nrows * n_per_row f32s; `out` holds nrows rows
        // of ggml_row_size bytes, which is what ggml_quantize_chunk writes for
        // rows [0, nrows). The types quantized here need no importance matrix,
        // so NULL is allowed; ggml_quantize_init is idempotent.
        let written = unsafe {
            sys::ggml_quantize_init(ty_id);
            sys::ggml_quantize_chunk(
                ty_id,
                values.as_ptr(),
                out.as_mut_ptr().cast(),
                0,
                nrows as i64,
                n_per_row as i64,
                std::ptr::null(),
            )
        };
        out.truncate(written);
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn type_ids_match_the_bindings() {
            for (ty, id) in [
                (GgmlType::Q4_0, sys::ggml_type_GGML_TYPE_Q4_0),
                (GgmlType::Q5_0, sys::ggml_type_GGML_TYPE_Q5_0),
                (GgmlType::Q5_1, sys::ggml_type_GGML_TYPE_Q5_1),
                (GgmlType::Q8_0, sys::ggml_type_GGML_TYPE_Q8_0),
            ] {
                assert_eq!(ty.id() as sys::ggml_type, id, "{ty}");
            }
        }

        #[test]
        fn q5_0_block_layout() {
            // One block: 0..31 scaled; max |x| is 3.1 (index 31), so d = 3.1 / -16.
            let values: Vec<f32> = (0..32).map(|i| i as f32 * 0.1).collect();
            let out = quantize_rows(GgmlType::Q5_0, &values, 32);
            assert_eq!(out.len(), 22);
            let d = half::f16::from_le_bytes([out[0], out[1]]).to_f32();
            assert_eq!(half::f16::from_f32(3.1 / -16.0).to_f32(), d);
            // x = 0 -> q = 16: low nibble 0, bit 4 set in qh bit 0.
            assert_eq!(out[6] & 0x0F, 0);
            assert_eq!(out[2] & 1, 1);
            // x = 3.1 (j = 31 = 15 + 16) -> q = 0: high nibble of qs[15] is 0, qh bit 31 clear.
            assert_eq!(out[6 + 15] >> 4, 0);
            assert_eq!(out[5] >> 7, 0);
        }
    }
}
