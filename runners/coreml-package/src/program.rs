//! From the decoded specification to the report: features, model type,
//! operation counts, and how weights are stored (dense `const` tensors in a
//! weight file, or palettized by `constexpr_lut_to_dense`).

use crate::proto::{self, Block, FeatureDescription, Model, Operation, Program, TensorType, Value};
use crate::report::{DenseTally, Feature, PaletteTally, WeightStorage};
use std::collections::BTreeMap;

/// A feature description as the report states it.
pub fn feature(f: &FeatureDescription) -> Feature {
    let t = f.r#type.as_ref();
    let array = t.and_then(|t| t.multi_array_type.as_ref());
    let kind = match t {
        None => "unknown",
        Some(t) if t.multi_array_type.is_some() => "multiArray",
        Some(t) if t.image_type.is_some() => "image",
        Some(t) if t.int64_type.is_some() => "int64",
        Some(t) if t.double_type.is_some() => "double",
        Some(t) if t.string_type.is_some() => "string",
        Some(t) if t.dictionary_type.is_some() => "dictionary",
        Some(t) if t.sequence_type.is_some() => "sequence",
        Some(t) if t.state_type.is_some() => "state",
        Some(_) => "unknown",
    };
    Feature {
        name: f.name.clone(),
        kind: kind.into(),
        shape: array.map(|a| a.shape.clone()).unwrap_or_default(),
        data_type: array.and_then(|a| proto::array_data_type(a.data_type).map(str::to_owned)),
        flexible_shape: array
            .is_some_and(|a| a.enumerated_shapes.is_some() || a.shape_range.is_some()),
    }
}

/// The model type's name, for the types memqual declares.
pub fn model_type(m: &Model) -> Option<String> {
    if m.ml_program.is_some() {
        Some("mlProgram".into())
    } else if m.neural_network.is_some() {
        Some("neuralNetwork".into())
    } else if m.pipeline.is_some() {
        Some("pipeline".into())
    } else {
        None
    }
}

/// What a program holds: op counts, weight storage, the weight files it
/// names (`@model_path/…` references with the offsets used in each).
#[derive(Debug, Default)]
pub struct ProgramFacts {
    /// Operations by type.
    pub operations: BTreeMap<String, u64>,
    /// Weight storage.
    pub weights: WeightStorage,
    /// The main function's opset.
    pub opset: Option<String>,
    /// Every blob file named, with the largest offset used in it.
    pub blob_files: BTreeMap<String, u64>,
}

#[derive(Default)]
struct Tally {
    dense: DenseTally,
    palettized: PaletteTally,
}

/// Walk every function and block of the program.
pub fn facts(program: &Program) -> ProgramFacts {
    let mut out = ProgramFacts {
        opset: program
            .functions
            .get("main")
            .map(|f| f.opset.clone())
            .filter(|s| !s.is_empty()),
        ..ProgramFacts::default()
    };
    let mut tally = Tally::default();
    for function in program.functions.values() {
        // The block the function runs is the one of its own opset; the
        // others are alternatives of the same program.
        let block = function
            .block_specializations
            .get(&function.opset)
            .or_else(|| function.block_specializations.values().next());
        if let Some(block) = block {
            let consts = const_types(block);
            visit(block, &consts, &mut out, &mut tally);
        }
    }
    let other = std::mem::take(&mut out.weights.other_compressed);
    out.weights = WeightStorage::from_tallies(tally.dense, tally.palettized, other);
    out
}

/// The tensor type of each `const` op's output, by output name (iOS 18's
/// `constexpr_*` ops take their operands from such consts by name).
fn const_types(block: &Block) -> BTreeMap<&str, &TensorType> {
    let mut out = BTreeMap::new();
    for op in &block.operations {
        if op.r#type == "const"
            && let Some(t) = op
                .attributes
                .get("val")
                .and_then(|v| v.r#type.as_ref())
                .and_then(|t| t.tensor_type.as_ref())
        {
            for o in &op.outputs {
                out.insert(o.name.as_str(), t);
            }
        }
    }
    out
}

fn visit(
    block: &Block,
    consts: &BTreeMap<&str, &TensorType>,
    out: &mut ProgramFacts,
    tally: &mut Tally,
) {
    for op in &block.operations {
        *out.operations.entry(op.r#type.clone()).or_default() += 1;
        for value in op.attributes.values().chain(
            op.inputs
                .values()
                .flat_map(|a| a.arguments.iter().filter_map(|b| b.value.as_ref())),
        ) {
            if let Some(blob) = &value.blob_file_value {
                let max = out.blob_files.entry(blob.file_name.clone()).or_default();
                *max = (*max).max(blob.offset);
            }
        }
        match op.r#type.as_str() {
            "const" => {
                if let Some(v) = op.attributes.get("val")
                    && v.blob_file_value.is_some()
                    && let Some(t) = tensor_of(v)
                    && let Some((name, bits)) = proto::mil_data_type(t.data_type)
                {
                    let slot = tally.dense.entry((name.into(), bits)).or_default();
                    slot.0 += 1;
                    slot.1 += elements(t);
                }
            }
            "constexpr_lut_to_dense" => {
                let bits = operand(op, "lut", consts).and_then(lut_bits);
                let expanded = op
                    .outputs
                    .first()
                    .and_then(|o| o.r#type.as_ref())
                    .and_then(|t| t.tensor_type.as_ref())
                    .map_or(0, elements);
                if let Some(bits) = bits {
                    let slot = tally.palettized.entry(bits).or_default();
                    slot.0 += 1;
                    slot.1 += expanded;
                } else {
                    *out.weights
                        .other_compressed
                        .entry("constexpr_lut_to_dense (unreadable table)".into())
                        .or_default() += 1;
                }
            }
            t if t.starts_with("constexpr_") => {
                *out.weights.other_compressed.entry(t.into()).or_default() += 1;
            }
            _ => {}
        }
        for nested in &op.blocks {
            visit(nested, consts, out, tally);
        }
    }
}

fn tensor_of(v: &Value) -> Option<&TensorType> {
    v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref())
}

/// An operand's tensor type: an attribute (iOS 16's constexpr ops), an
/// inline value, or a const named by the binding (iOS 18).
fn operand<'a>(
    op: &'a Operation,
    name: &str,
    consts: &BTreeMap<&str, &'a TensorType>,
) -> Option<&'a TensorType> {
    if let Some(v) = op.attributes.get(name) {
        return tensor_of(v);
    }
    let binding = op.inputs.get(name)?.arguments.first()?;
    if let Some(v) = &binding.value {
        return tensor_of(v);
    }
    binding.name.as_deref().and_then(|n| consts.get(n).copied())
}

/// Index width of a lookup table: iOS 16's table is `[2^bits]`; iOS 18's is
/// `[..., 2^bits, vector_size]`. Only a power of two counts.
fn lut_bits(lut: &TensorType) -> Option<u32> {
    let dims: Vec<u64> = lut
        .dimensions
        .iter()
        .map(|d| d.constant.as_ref().map(|c| c.size))
        .collect::<Option<_>>()?;
    let entries = match dims.len() {
        0 => return None,
        1 => dims[0],
        n => dims[n - 2],
    };
    (entries >= 2 && entries.is_power_of_two()).then(|| entries.trailing_zeros())
}

fn elements(t: &TensorType) -> u64 {
    t.dimensions
        .iter()
        .map(|d| d.constant.as_ref().map_or(0, |c| c.size))
        .fold(1u64, u64::saturating_mul)
}
