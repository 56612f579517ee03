//! A compiled model (`.mlmodelc`), as `xcrun coremlcompiler compile` writes
//! it. Its description (`coremldata.bin`) is in a binary format Apple does
//! not publish, so memqual does not parse it; it reads what is text:
//! `metadata.json` (the compiler's summary: spec version, input and output
//! schemas, the op histogram) and `model.mil` (the program, whose
//! `constexpr_lut_to_dense` lines give the palettized weights). What is not
//! read is listed in the report with the reason.
//!
//! The layout of these two files is taken from Apple's compiler output as
//! other tools read it; no compiled model was available where this reader
//! was written, so a Mac must confirm it (docs/macos.md).

use crate::error::CoremlError;
use crate::report::{
    DenseTally, Feature, Format, ModelReport, NotRead, PaletteTally, WeightStorage,
};
use crate::walk::Tree;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The compiled description every `.mlmodelc` holds.
pub const COREMLDATA: &str = "coremldata.bin";
/// The compiler's summary.
pub const METADATA: &str = "metadata.json";
/// The ML Program's text.
pub const MIL: &str = "model.mil";
/// Largest `metadata.json` read.
pub const METADATA_LIMIT: u64 = 16 << 20;
/// Largest `model.mil` read.
pub const MIL_LIMIT: u64 = 256 << 20;

/// `metadata.json`: an array holding one object; only these keys are read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompiledMetadata {
    specification_version: Option<i64>,
    #[serde(default)]
    input_schema: Vec<SchemaEntry>,
    #[serde(default)]
    output_schema: Vec<SchemaEntry>,
    #[serde(default)]
    ml_program_operation_type_histogram: BTreeMap<String, u64>,
    model_type: Option<ModelType>,
    #[serde(default)]
    user_defined_metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct ModelType {
    name: String,
}

/// One feature of a schema: the shape is a string such as `"[1, 80, 3000]"`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaEntry {
    name: String,
    #[serde(default)]
    r#type: Option<String>,
    #[serde(default)]
    data_type: Option<String>,
    #[serde(default)]
    shape: Option<String>,
    #[serde(default)]
    has_shape_flexibility: Option<String>,
}

fn parse_shape(text: &str) -> Option<Vec<i64>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|d| d.trim().parse().ok()).collect()
}

fn feature(e: &SchemaEntry, path: &Path) -> Result<Feature, CoremlError> {
    let shape = match &e.shape {
        None => Vec::new(),
        Some(s) => parse_shape(s).ok_or_else(|| {
            CoremlError::malformed(
                path,
                format!("feature {}: shape {s:?} is not [a, b, …]", e.name),
            )
        })?,
    };
    let kind = match e.r#type.as_deref() {
        Some("MultiArray") => "multiArray",
        Some("Image") => "image",
        Some("Int64") => "int64",
        Some("Double") => "double",
        Some("String") => "string",
        Some("Dictionary") => "dictionary",
        Some("Sequence") => "sequence",
        Some("State") => "state",
        _ => "unknown",
    };
    Ok(Feature {
        name: e.name.clone(),
        kind: kind.into(),
        shape,
        data_type: e.data_type.clone(),
        flexible_shape: e.has_shape_flexibility.as_deref() == Some("1"),
    })
}

/// `tensor<fp16, [384, 80, 3]>` at the start of `s`: (type, dims).
fn tensor_type(s: &str) -> Option<(&str, Vec<u64>)> {
    let rest = s.strip_prefix("tensor<")?;
    let (dtype, rest) = rest.split_once(", [")?;
    let (dims, _) = rest.split_once("]>")?;
    let dims = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse().ok())
            .collect::<Option<_>>()?
    };
    Some((dtype.trim(), dims))
}

fn mil_bits(dtype: &str) -> Option<u32> {
    Some(match dtype {
        "fp16" | "bf16" | "int16" | "uint16" => 16,
        "fp32" | "int32" | "uint32" => 32,
        "fp64" | "int64" | "uint64" => 64,
        "int8" | "uint8" => 8,
        _ => return None,
    })
}

/// Weight storage from the program text: one op per line,
/// `tensor<T, [dims]> name = op(…)[…]`.
fn weights_from_mil(text: &str) -> WeightStorage {
    let mut dense = DenseTally::new();
    let mut pal = PaletteTally::new();
    let mut other: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        let Some((out_type, dims)) = tensor_type(line) else {
            continue;
        };
        let Some((_, call)) = line.split_once(" = ") else {
            continue;
        };
        let op: String = call
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let elements = dims.iter().fold(1u64, |a, &d| a.saturating_mul(d));
        if op == "const" && line.contains("BLOBFILE(") {
            if let Some(bits) = mil_bits(out_type) {
                let slot = dense.entry((out_type.to_owned(), bits)).or_default();
                slot.0 += 1;
                slot.1 += elements;
            }
        } else if op == "constexpr_lut_to_dense" {
            let bits = line
                .split_once("lut = ")
                .and_then(|(_, t)| tensor_type(t))
                .and_then(|(_, lut)| {
                    let entries = match lut.len() {
                        0 => return None,
                        1 => lut[0],
                        n => lut[n - 2],
                    };
                    (entries >= 2 && entries.is_power_of_two()).then(|| entries.trailing_zeros())
                });
            match bits {
                Some(bits) => {
                    let slot = pal.entry(bits).or_default();
                    slot.0 += 1;
                    slot.1 += elements;
                }
                None => {
                    *other
                        .entry("constexpr_lut_to_dense (unreadable table)".into())
                        .or_default() += 1
                }
            }
        } else if op.starts_with("constexpr_") {
            *other.entry(op).or_default() += 1;
        }
    }
    WeightStorage::from_tallies(dense, pal, other)
}

/// Read the compiled model at `root` (already listed as `tree`).
pub fn read(root: &Path, tree: &Tree) -> Result<ModelReport, CoremlError> {
    let mut not_read = Vec::new();
    let mut report = ModelReport {
        path: root.to_path_buf(),
        format: Format::Mlmodelc,
        files: tree.files.len() as u64,
        directories: tree.directories,
        package_bytes: None,
        compiled_bytes: Some(tree.bytes()),
        spec_version: None,
        model_type: None,
        opset: None,
        inputs: Vec::new(),
        outputs: Vec::new(),
        weights: None,
        operations: BTreeMap::new(),
        metadata: BTreeMap::new(),
        not_read: Vec::new(),
    };
    if tree.file(METADATA).is_some() {
        let path = root.join(METADATA);
        let text = run_dir::input::read_text(&path, METADATA_LIMIT)?;
        let mut all: Vec<CompiledMetadata> = serde_json::from_str(&text).map_err(|e| {
            CoremlError::malformed(&path, format!("not a compiled model's metadata: {e}"))
        })?;
        if all.len() != 1 {
            return Err(CoremlError::malformed(
                &path,
                format!(
                    "{} model entries; a compiled model has exactly one",
                    all.len()
                ),
            ));
        }
        let m = all.remove(0);
        report.spec_version = m.specification_version;
        report.model_type = m.model_type.map(|t| {
            t.name
                .strip_prefix("MLModelType_")
                .map_or(t.name.clone(), str::to_owned)
        });
        report.inputs = m
            .input_schema
            .iter()
            .map(|e| feature(e, &path))
            .collect::<Result<_, _>>()?;
        report.outputs = m
            .output_schema
            .iter()
            .map(|e| feature(e, &path))
            .collect::<Result<_, _>>()?;
        report.operations = m.ml_program_operation_type_histogram;
        report.metadata = m.user_defined_metadata;
    } else {
        not_read.push(NotRead {
            file: METADATA.into(),
            reason: "absent: no feature descriptions or spec version without it".into(),
        });
    }
    if tree.file(MIL).is_some() {
        let text = run_dir::input::read_text(&root.join(MIL), MIL_LIMIT)?;
        report.weights = Some(weights_from_mil(&text));
        report.opset = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("func main<"))
            .and_then(|r| r.split_once('>'))
            .map(|(opset, _)| opset.to_owned());
    }
    for f in &tree.files {
        if f.rel != METADATA && f.rel != MIL {
            let reason = if f.rel == COREMLDATA || f.rel.ends_with("/coremldata.bin") {
                "Core ML's compiled description: a binary format Apple does not publish"
            } else if f.rel.starts_with("weights/") {
                "weight data: its size is counted, its values are not read"
            } else {
                "not a file memqual reads"
            };
            not_read.push(NotRead {
                file: f.rel.clone(),
                reason: reason.into(),
            });
        }
    }
    report.not_read = not_read;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::PalettizedWeights;

    #[test]
    fn shapes_and_tensor_types_parse() {
        assert_eq!(parse_shape("[1, 80, 3000]"), Some(vec![1, 80, 3000]));
        assert_eq!(parse_shape("[]"), Some(vec![]));
        assert_eq!(parse_shape("1, 80"), None);
        assert_eq!(parse_shape("[1, x]"), None);
        assert_eq!(
            tensor_type("tensor<fp16, [384, 80, 3]> w = const()"),
            Some(("fp16", vec![384, 80, 3]))
        );
        assert_eq!(tensor_type("tensor<fp16, [a]>"), None);
    }

    #[test]
    fn palettized_lines_give_their_index_width() {
        let text = "\
    tensor<fp16, [384, 80, 3]> w_pal = constexpr_lut_to_dense()[indices = tensor<uint8, [69120]>(BLOBFILE(path = tensor<string, []>(\"@model_path/weights/weight.bin\"), offset = tensor<uint64, []>(64))), lut = tensor<fp16, [64]>(BLOBFILE(path = tensor<string, []>(\"@model_path/weights/weight.bin\"), offset = tensor<uint64, []>(69248))), name = tensor<string, []>(\"w_pal\"), shape = tensor<uint32, [3]>([384, 80, 3])];
    tensor<fp16, [384]> b = const()[name = tensor<string, []>(\"b\"), val = tensor<fp16, [384]>(BLOBFILE(path = tensor<string, []>(\"@model_path/weights/weight.bin\"), offset = tensor<uint64, []>(70000)))];
";
        let w = weights_from_mil(text);
        assert_eq!(
            w.palettized,
            vec![PalettizedWeights {
                bits: 6,
                tensors: 1,
                elements: 92160
            }]
        );
        assert_eq!(w.dense.len(), 1);
        assert_eq!((w.dense[0].bits, w.dense[0].elements), (16, 384));
        assert_eq!(w.bit_depth(), Some(6));
    }
}
