//! The few messages of Core ML's public specification that memqual reads,
//! declared by hand with their field numbers (`Model.proto`,
//! `FeatureTypes.proto`, `MIL.proto` of Core ML Tools 9.0, package
//! `CoreML.Specification`). Only the fields memqual uses are declared;
//! prost skips every other field, so a newer model still decodes. A model
//! type memqual does not name (tree ensembles, GLMs, …) decodes to
//! [`Model`] with none of its type fields set. Nested messages decode under
//! prost's recursion limit (100), so deep nesting fails instead of
//! overflowing the stack.

use std::collections::BTreeMap;

/// A message whose contents memqual does not read (only its presence).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Opaque {}

/// `Model` (Model.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Model {
    /// `specificationVersion = 1`.
    #[prost(int32, tag = "1")]
    pub specification_version: i32,
    /// `description = 2`.
    #[prost(message, optional, tag = "2")]
    pub description: Option<ModelDescription>,
    /// `pipeline = 202` (one of the model types).
    #[prost(message, optional, tag = "202")]
    pub pipeline: Option<Opaque>,
    /// `neuralNetwork = 500`.
    #[prost(message, optional, tag = "500")]
    pub neural_network: Option<Opaque>,
    /// `mlProgram = 502`.
    #[prost(message, optional, tag = "502")]
    pub ml_program: Option<Program>,
}

/// `ModelDescription` (Model.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelDescription {
    /// `input = 1`.
    #[prost(message, repeated, tag = "1")]
    pub input: Vec<FeatureDescription>,
    /// `output = 10`.
    #[prost(message, repeated, tag = "10")]
    pub output: Vec<FeatureDescription>,
    /// `metadata = 100`.
    #[prost(message, optional, tag = "100")]
    pub metadata: Option<Metadata>,
}

/// `Metadata` (Model.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    /// `shortDescription = 1`.
    #[prost(string, tag = "1")]
    pub short_description: String,
    /// `userDefined = 100` (map<string, string>).
    #[prost(btree_map = "string, string", tag = "100")]
    pub user_defined: BTreeMap<String, String>,
}

/// `FeatureDescription` (Model.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureDescription {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `type = 3`.
    #[prost(message, optional, tag = "3")]
    pub r#type: Option<FeatureType>,
}

/// `FeatureType` (FeatureTypes.proto): a oneof of the feature kinds, read
/// as optional fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureType {
    /// `int64Type = 1`.
    #[prost(message, optional, tag = "1")]
    pub int64_type: Option<Opaque>,
    /// `doubleType = 2`.
    #[prost(message, optional, tag = "2")]
    pub double_type: Option<Opaque>,
    /// `stringType = 3`.
    #[prost(message, optional, tag = "3")]
    pub string_type: Option<Opaque>,
    /// `imageType = 4`.
    #[prost(message, optional, tag = "4")]
    pub image_type: Option<Opaque>,
    /// `multiArrayType = 5`.
    #[prost(message, optional, tag = "5")]
    pub multi_array_type: Option<ArrayFeatureType>,
    /// `dictionaryType = 6`.
    #[prost(message, optional, tag = "6")]
    pub dictionary_type: Option<Opaque>,
    /// `sequenceType = 7`.
    #[prost(message, optional, tag = "7")]
    pub sequence_type: Option<Opaque>,
    /// `stateType = 8`.
    #[prost(message, optional, tag = "8")]
    pub state_type: Option<Opaque>,
    /// `isOptional = 1000`.
    #[prost(bool, tag = "1000")]
    pub is_optional: bool,
}

/// `ArrayFeatureType` (FeatureTypes.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayFeatureType {
    /// `shape = 1` (repeated int64; the default shape).
    #[prost(int64, repeated, tag = "1")]
    pub shape: Vec<i64>,
    /// `dataType = 2` (ArrayDataType: FLOAT32 = 65568, DOUBLE = 65600,
    /// INT32 = 131104, INT8 = 131080, FLOAT16 = 65552).
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// `enumeratedShapes = 21` (shape flexibility).
    #[prost(message, optional, tag = "21")]
    pub enumerated_shapes: Option<Opaque>,
    /// `shapeRange = 31` (shape flexibility).
    #[prost(message, optional, tag = "31")]
    pub shape_range: Option<Opaque>,
}

/// `MILSpec.Program` (MIL.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Program {
    /// `version = 1`.
    #[prost(int64, tag = "1")]
    pub version: i64,
    /// `functions = 2` (map<string, Function>).
    #[prost(btree_map = "string, message", tag = "2")]
    pub functions: BTreeMap<String, Function>,
}

/// `MILSpec.Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// `opset = 2`: the opset the main block is written in (e.g. `CoreML6`).
    #[prost(string, tag = "2")]
    pub opset: String,
    /// `block_specializations = 3` (map<string, Block>, keyed by opset).
    #[prost(btree_map = "string, message", tag = "3")]
    pub block_specializations: BTreeMap<String, Block>,
}

/// `MILSpec.Block`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Block {
    /// `outputs = 2`: the names of the block's outputs.
    #[prost(string, repeated, tag = "2")]
    pub outputs: Vec<String>,
    /// `operations = 3`.
    #[prost(message, repeated, tag = "3")]
    pub operations: Vec<Operation>,
}

/// `MILSpec.Operation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Operation {
    /// `type = 1`: the op's name (`const`, `conv`, `constexpr_lut_to_dense`).
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `inputs = 2` (map<string, Argument>).
    #[prost(btree_map = "string, message", tag = "2")]
    pub inputs: BTreeMap<String, Argument>,
    /// `outputs = 3`.
    #[prost(message, repeated, tag = "3")]
    pub outputs: Vec<NamedValueType>,
    /// `blocks = 4`: nested blocks (control flow).
    #[prost(message, repeated, tag = "4")]
    pub blocks: Vec<Block>,
    /// `attributes = 5` (map<string, Value>): a `const`'s `val`, and the
    /// constant operands of iOS 16's `constexpr_*` ops.
    #[prost(btree_map = "string, message", tag = "5")]
    pub attributes: BTreeMap<String, Value>,
}

/// `MILSpec.NamedValueType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedValueType {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `type = 2`.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<ValueType>,
}

/// `MILSpec.Argument`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Argument {
    /// `arguments = 1`.
    #[prost(message, repeated, tag = "1")]
    pub arguments: Vec<Binding>,
}

/// `MILSpec.Argument.Binding`: a value by name, or inline.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Binding {
    /// `name = 1`: another op's output.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// `value = 2`: an inline value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Value>,
}

/// `MILSpec.Value`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    /// `type = 2`.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<ValueType>,
    /// `immediateValue = 3` (contents not read).
    #[prost(message, optional, tag = "3")]
    pub immediate_value: Option<Opaque>,
    /// `blobFileValue = 5`.
    #[prost(message, optional, tag = "5")]
    pub blob_file_value: Option<BlobFileValue>,
}

/// `MILSpec.Value.BlobFileValue`: bytes stored in a weight file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlobFileValue {
    /// `fileName = 1` (`@model_path/weights/weight.bin`).
    #[prost(string, tag = "1")]
    pub file_name: String,
    /// `offset = 2`: where the blob's header starts in the file.
    #[prost(uint64, tag = "2")]
    pub offset: u64,
}

/// `MILSpec.ValueType` (a oneof; memqual reads tensors only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// `tensorType = 1`.
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorType>,
}

/// `MILSpec.TensorType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorType {
    /// `dataType = 1` (MILSpec.DataType).
    #[prost(int32, tag = "1")]
    pub data_type: i32,
    /// `rank = 2`.
    #[prost(int64, tag = "2")]
    pub rank: i64,
    /// `dimensions = 3`.
    #[prost(message, repeated, tag = "3")]
    pub dimensions: Vec<Dimension>,
}

/// `MILSpec.Dimension`: a constant size, or unknown.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    /// `constant = 1`.
    #[prost(message, optional, tag = "1")]
    pub constant: Option<ConstantDimension>,
}

/// `MILSpec.Dimension.ConstantDimension`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConstantDimension {
    /// `size = 1`.
    #[prost(uint64, tag = "1")]
    pub size: u64,
}

/// `ArrayFeatureType.ArrayDataType` by value.
pub fn array_data_type(value: i32) -> Option<&'static str> {
    Some(match value {
        65568 => "Float32",
        65600 => "Float64",
        65552 => "Float16",
        131104 => "Int32",
        131080 => "Int8",
        _ => return None,
    })
}

/// `MILSpec.DataType` by value: its MIL name and bits per element.
pub fn mil_data_type(value: i32) -> Option<(&'static str, u32)> {
    Some(match value {
        1 => ("bool", 1),
        10 => ("fp16", 16),
        11 => ("fp32", 32),
        12 => ("fp64", 64),
        13 => ("bf16", 16),
        21 => ("int8", 8),
        22 => ("int16", 16),
        23 => ("int32", 32),
        24 => ("int64", 64),
        25 => ("int4", 4),
        31 => ("uint8", 8),
        32 => ("uint16", 16),
        33 => ("uint32", 32),
        34 => ("uint64", 64),
        35 => ("uint4", 4),
        36 => ("uint2", 2),
        37 => ("uint1", 1),
        38 => ("uint6", 6),
        39 => ("uint3", 3),
        40 => ("fp8e4m3fn", 8),
        41 => ("fp8e5m2", 8),
        _ => return None,
    })
}
