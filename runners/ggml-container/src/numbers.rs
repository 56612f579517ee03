//! Little-endian element conversions shared by the quantizer and the
//! CTranslate2 converter (crate `ct2-convert`).

use half::f16;

/// Little-endian IEEE half floats, widened (a trailing odd byte is ignored).
pub fn f16_le_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

/// Little-endian `f32`s (a trailing partial value is ignored).
pub fn f32_le_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// F16 bytes, rounding to nearest even like ggml's `ggml_fp32_to_fp16_row`.
pub fn f32_to_f16_le(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect()
}

/// `f32`s, little-endian.
pub fn f32_to_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
