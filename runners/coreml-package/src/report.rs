//! What `memqual artifact inspect` reports about a Core ML model.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which of Core ML's two on-disk forms the model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A portable model package (`.mlpackage`): `Manifest.json`, the
    /// `Model.proto` specification and its weight files.
    Mlpackage,
    /// A compiled model (`.mlmodelc`), as `xcrun coremlcompiler compile`
    /// writes it and whisper.cpp loads it.
    Mlmodelc,
}

/// One input or output of the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    /// The feature's name (whisper.cpp binds `logmel_data` and `output`).
    pub name: String,
    /// Its kind: `multiArray`, `image`, `int64`, `double`, `string`,
    /// `dictionary`, `sequence`, `state`, or `unknown`.
    pub kind: String,
    /// The array's shape (its default shape when the shape is flexible);
    /// empty for other kinds.
    pub shape: Vec<i64>,
    /// The array's element type (`Float32`, `Float16`, `Float64`, `Int32`,
    /// `Int8`), or `None` for other kinds or an unknown code.
    pub data_type: Option<String>,
    /// Whether the shape may vary (enumerated shapes or a range).
    pub flexible_shape: bool,
}

/// Weights stored as plain tensors of one element type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseWeights {
    /// MIL element type (`fp16`, `fp32`, …).
    pub data_type: String,
    /// Bits per weight.
    pub bits: u32,
    /// Weight tensors (`const` ops stored in a weight file).
    pub tensors: u64,
    /// Weights in them.
    pub elements: u64,
}

/// Weights palettized to a lookup table of `2^bits` entries
/// (`constexpr_lut_to_dense`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PalettizedWeights {
    /// Bits per weight index (the table has `2^bits` entries).
    pub bits: u32,
    /// Palettized tensors.
    pub tensors: u64,
    /// Weights they expand to.
    pub elements: u64,
}

/// How the model stores its weights.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WeightStorage {
    /// Dense weights, one entry per element type.
    pub dense: Vec<DenseWeights>,
    /// Palettized weights, one entry per index width.
    pub palettized: Vec<PalettizedWeights>,
    /// Other compressed weights (`constexpr_affine_dequantize`,
    /// `constexpr_sparse_to_dense`, …): op type and count.
    pub other_compressed: BTreeMap<String, u64>,
}

/// Tensors and weights counted per dense (element type, bits).
pub(crate) type DenseTally = BTreeMap<(String, u32), (u64, u64)>;
/// Tensors and weights counted per palette index width.
pub(crate) type PaletteTally = BTreeMap<u32, (u64, u64)>;

impl WeightStorage {
    /// The storage the tallies of a program describe.
    pub(crate) fn from_tallies(
        dense: DenseTally,
        palettized: PaletteTally,
        other_compressed: BTreeMap<String, u64>,
    ) -> Self {
        WeightStorage {
            dense: dense
                .into_iter()
                .map(|((data_type, bits), (tensors, elements))| DenseWeights {
                    data_type,
                    bits,
                    tensors,
                    elements,
                })
                .collect(),
            palettized: palettized
                .into_iter()
                .map(|(bits, (tensors, elements))| PalettizedWeights {
                    bits,
                    tensors,
                    elements,
                })
                .collect(),
            other_compressed,
        }
    }

    /// Whether any weight is palettized.
    pub fn is_palettized(&self) -> bool {
        !self.palettized.is_empty()
    }

    /// The bit depth most weights are stored at (by weight count), or `None`
    /// when no weight tensor was found.
    pub fn bit_depth(&self) -> Option<u32> {
        let dense = self.dense.iter().map(|d| (d.elements, d.bits));
        let pal = self.palettized.iter().map(|p| (p.elements, p.bits));
        dense.chain(pal).max().map(|(_, bits)| bits)
    }
}

/// One file of the model that memqual did not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotRead {
    /// Its path inside the model.
    pub file: String,
    /// Why it was not read.
    pub reason: String,
}

/// Everything memqual reads from a Core ML model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelReport {
    /// The model directory, links resolved.
    pub path: PathBuf,
    /// `.mlpackage` or `.mlmodelc`.
    pub format: Format,
    /// Regular files in the tree.
    pub files: u64,
    /// Folders below the root.
    pub directories: u64,
    /// Bytes of the package's files (a `.mlpackage`); `None` for a compiled model.
    pub package_bytes: Option<u64>,
    /// Bytes of the compiled model's files (a `.mlmodelc`); `None`: not compiled.
    pub compiled_bytes: Option<u64>,
    /// Core ML specification version (7 = macOS 13 / iOS 16, 8 = macOS 14,
    /// 9 = macOS 15), when the model states it.
    pub spec_version: Option<i64>,
    /// The model type (`mlProgram`, `neuralNetwork`, `pipeline`), when known.
    pub model_type: Option<String>,
    /// The ML Program's opset of its main function (`CoreML6` = iOS 16 /
    /// macOS 13), when readable.
    pub opset: Option<String>,
    /// The model's inputs, in declared order.
    pub inputs: Vec<Feature>,
    /// The model's outputs, in declared order.
    pub outputs: Vec<Feature>,
    /// How the weights are stored, when the program was readable.
    pub weights: Option<WeightStorage>,
    /// Operations of the program by type (all functions, nested blocks included).
    pub operations: BTreeMap<String, u64>,
    /// The model's user-defined metadata (`com.github.apple.coremltools.version`, …).
    pub metadata: BTreeMap<String, String>,
    /// Files present but not read, with the reason.
    pub not_read: Vec<NotRead>,
}
