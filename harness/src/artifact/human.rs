//! Human-readable summaries of the artifact tools' results (pure functions).

use ggml_container::corpus::CorpusManifest;
use ggml_container::derive::{BinaryClosure, Derivation, DerivationReceipt, LibraryContent};
use ggml_container::estimate::StateEstimate;
use ggml_container::{GgmlType, Inventory};
use std::fmt::Write;
use std::path::Path;

/// `1234567` as `1,234,567`.
pub(super) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

pub fn inventory(path: &Path, inv: &Inventory, tensors: bool) -> String {
    let h = &inv.hparams;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} bytes, SHA-256 {}",
        path.display(),
        grouped(inv.file_len),
        inv.file_sha256
    );
    let _ = writeln!(
        s,
        "  hparams: n_vocab {}, n_audio_ctx {}, n_audio_state {}, n_audio_head {}, n_audio_layer {}, n_text_ctx {}, n_text_state {}, n_text_head {}, n_text_layer {}, n_mels {}, ftype {}",
        h.n_vocab,
        h.n_audio_ctx,
        h.n_audio_state,
        h.n_audio_head,
        h.n_audio_layer,
        h.n_text_ctx,
        h.n_text_state,
        h.n_text_head,
        h.n_text_layer,
        h.n_mels,
        h.ftype
    );
    let _ = writeln!(
        s,
        "  ftype {} = {} weights (quantization version {}); family {:?}; {}",
        inv.ftype.raw,
        inv.ftype.weight_type,
        inv.ftype.quantization_version,
        inv.family,
        if inv.multilingual {
            "multilingual"
        } else {
            "English-only"
        }
    );
    let _ = writeln!(
        s,
        "  mel filters {} x {} at [{}, {}); vocabulary {} tokens at [{}, {})",
        inv.mel.n_mel,
        inv.mel.n_fft,
        inv.mel.offset,
        inv.mel.end,
        inv.vocab.count,
        inv.vocab.offset,
        inv.vocab.end
    );
    let _ = writeln!(
        s,
        "  prefix {} bytes, SHA-256 {}",
        grouped(inv.prefix_len),
        inv.prefix_sha256
    );
    let t = &inv.totals;
    let _ = writeln!(
        s,
        "  {} tensor records ({:?}): native encoder {} ({} payload bytes), decoder {} ({} payload bytes)",
        inv.tensors.len(),
        inv.expect,
        t.native_encoder.records,
        grouped(t.native_encoder.payload_bytes),
        t.decoder.records,
        grouped(t.decoder.payload_bytes)
    );
    let types: Vec<String> = GgmlType::ALL
        .iter()
        .filter(|ty| inv.count_of(**ty) > 0)
        .map(|ty| format!("{ty} {}", inv.count_of(*ty)))
        .collect();
    let _ = writeln!(s, "  types: {}", types.join(", "));
    if tensors {
        for r in &inv.tensors {
            let _ = writeln!(
                s,
                "  {:>4} {:<42} {:<5} {:<18} @{:<10} {:>10} B {}",
                r.index,
                r.name,
                r.ggml_type.name(),
                format!("{:?}", r.ne),
                r.record_offset,
                r.payload_len,
                &r.payload_sha256[..16]
            );
        }
    }
    s
}

/// The class a receipt's derivation kept, in words.
fn kept_class(r: &DerivationReceipt) -> &'static str {
    match Derivation::from_sentence(&r.derivation) {
        Some(Derivation::EncoderOnly) => "native-encoder",
        _ => "decoder",
    }
}

/// The class a receipt's derivation removed, in words.
pub fn removed_class(r: &DerivationReceipt) -> &'static str {
    match Derivation::from_sentence(&r.derivation) {
        Some(Derivation::EncoderOnly) => "decoder",
        _ => "native-encoder",
    }
}

pub fn derivation(out: &Path, r: &DerivationReceipt) -> String {
    let t = &r.totals;
    format!(
        "{}: {} bytes, SHA-256 {}\n  kept prefix ({} bytes) + {} {} records ({} record bytes)\n  removed {} {} records ({} record bytes, {} payload bytes)\n{}  receipt sealed {}\n",
        out.display(),
        grouped(r.output.bytes),
        r.output.sha256,
        grouped(r.prefix.bytes),
        t.retained_records,
        kept_class(r),
        grouped(t.retained_record_bytes),
        t.removed_records,
        removed_class(r),
        grouped(t.removed_record_bytes),
        grouped(t.removed_payload_bytes),
        provenance(r),
        r.receipt_sha256
    )
}

/// What the receipt says it rests on, one line each.
pub fn provenance(r: &DerivationReceipt) -> String {
    let tool = &r.tool;
    let rt = &r.runtime;
    let closure = match &r.binary_closure {
        BinaryClosure::Recorded { method, libraries } => {
            let hashed = libraries
                .iter()
                .filter(|l| matches!(l.content, LibraryContent::Hashed { .. }))
                .count();
            format!(
                "{} shared libraries ({hashed} hashed) from {method}",
                libraries.len()
            )
        }
        BinaryClosure::Unavailable { reason } => format!("unavailable: {reason}"),
    };
    format!(
        "  made by {} {} (commit {}), {} SHA-256 {}\n  verified by {}\n  for {}: {} {} (checksum {}), features {}, patch set {} ({} files)\n  binary closure: {closure}\n",
        tool.name,
        tool.version,
        tool.commit.as_deref().unwrap_or("unknown"),
        tool.executable,
        tool.executable_sha256.as_deref().unwrap_or("unreadable"),
        r.verified_by
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        rt.package,
        rt.source_crate,
        rt.source_crate_version,
        rt.source_checksum,
        rt.features.join(","),
        rt.patch_set_digest,
        rt.patches.len(),
    )
}

pub fn corpus(dir: &Path, m: &CorpusManifest) -> String {
    let mut s = format!(
        "{}: {} cases from a {}-byte source (SHA-256 {}); manifest.json written\n",
        dir.display(),
        m.cases.len(),
        grouped(m.source_bytes),
        m.source_sha256
    );
    for c in &m.cases {
        let _ = writeln!(
            s,
            "  {:<28} rejected as {} at byte {}{}",
            c.case,
            c.rejection.defect,
            c.rejection.offset,
            c.rejection
                .record
                .map(|r| format!(", record {r}"))
                .unwrap_or_default()
        );
    }
    s
}

pub fn estimate(path: &Path, e: &StateEstimate) -> String {
    let mut s = format!(
        "{}: state for {} audio / {} text positions (padded {} / {}), {} decoder(s)\n",
        path.display(),
        e.audio_ctx,
        e.text_ctx,
        e.padded_audio_ctx,
        e.padded_text_ctx,
        e.decoders
    );
    let _ = writeln!(
        s,
        "  kv self  {:>16} B ({}; x{} for the decoders)",
        grouped(e.kv_self_bytes),
        mb(e.kv_self_bytes),
        e.kv_self_factor
    );
    let _ = writeln!(
        s,
        "  kv cross {:>16} B ({})",
        grouped(e.kv_cross_bytes),
        mb(e.kv_cross_bytes)
    );
    let _ = writeln!(
        s,
        "  kv pad   {:>16} B ({})",
        grouped(e.kv_pad_bytes),
        mb(e.kv_pad_bytes)
    );
    let _ = writeln!(
        s,
        "  logits reserve {:>10} B ({}, {} tokens; reserved, not necessarily touched)",
        grouped(e.logits_reserve_bytes),
        mb(e.logits_reserve_bytes),
        e.logits_batch
    );
    if let (Some(enc), Some(dec)) = (e.native_encoder_weight_bytes, e.decoder_weight_bytes) {
        let _ = writeln!(
            s,
            "  weights: native encoder {} B, decoder {} B",
            grouped(enc),
            grouped(dec)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_thousands() {
        assert_eq!(super::grouped(77_704_698), "77,704,698");
        assert_eq!(super::grouped(586), "586");
        assert_eq!(super::grouped(1000), "1,000");
    }
}
