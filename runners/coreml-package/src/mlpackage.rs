//! A model package (`.mlpackage`): `Manifest.json` names the root model
//! item (`Data/com.apple.CoreML/model.mlmodel`), a serialized `Model.proto`;
//! an ML Program's weights live in files it names (`@model_path/weights/…`),
//! which must be in the package and long enough for every offset used.

use crate::error::CoremlError;
use crate::program;
use crate::proto::Model;
use crate::report::{Format, ModelReport};
use crate::walk::Tree;
use prost::Message;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest's name at the package root.
pub const MANIFEST: &str = "Manifest.json";
/// Largest `Manifest.json` read (Core ML writes well under a kilobyte).
pub const MANIFEST_LIMIT: u64 = 1 << 20;
/// Largest specification read. An ML Program's weights are in weight
/// files, so its `model.mlmodel` is the program text only (tiny.en's
/// encoder: about 40 KB); a neural network's weights are inline, hence the room.
pub const SPEC_LIMIT: u64 = 256 << 20;

/// `Manifest.json` as Core ML writes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    file_format_version: String,
    item_info_entries: BTreeMap<String, ManifestItem>,
    root_model_identifier: String,
}

/// One item of the manifest; `path` is relative to the package's `Data/`.
#[derive(Debug, Deserialize)]
struct ManifestItem {
    path: String,
}

/// A relative path that stays inside its folder: no root, no `..`, no empty part.
fn contained(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Decode a specification. A protobuf cut at a field boundary still
/// decodes, so a model whose type memqual does not read (the type is the
/// last field Core ML Tools writes) is refused as truncated too.
fn decode_spec(bytes: &[u8]) -> Result<Model, String> {
    let model = Model::decode(bytes).map_err(|e| {
        format!(
            "not a Core ML specification (Model.proto), truncated or damaged: {e} ({} bytes)",
            bytes.len()
        )
    })?;
    if program::model_type(&model).is_none() {
        return Err(format!(
            "no ML Program, neural network or pipeline in the specification ({} bytes): \
             truncated, or a kind of model memqual does not read",
            bytes.len()
        ));
    }
    Ok(model)
}

/// Read the package at `root` (already listed as `tree`).
pub fn read(root: &Path, tree: &Tree) -> Result<ModelReport, CoremlError> {
    let manifest_path = root.join(MANIFEST);
    let text = run_dir::input::read_text(&manifest_path, MANIFEST_LIMIT)?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
        CoremlError::malformed(&manifest_path, format!("not a package manifest: {e}"))
    })?;
    if !manifest.file_format_version.starts_with("1.") {
        return Err(CoremlError::malformed(
            &manifest_path,
            format!(
                "fileFormatVersion {:?}; memqual reads version 1 packages",
                manifest.file_format_version
            ),
        ));
    }
    let root_item = manifest
        .item_info_entries
        .get(&manifest.root_model_identifier)
        .ok_or_else(|| {
            CoremlError::malformed(
                &manifest_path,
                format!(
                    "rootModelIdentifier {} names no item of itemInfoEntries",
                    manifest.root_model_identifier
                ),
            )
        })?;
    if !contained(&root_item.path) {
        return Err(CoremlError::malformed(
            &manifest_path,
            format!(
                "the root model's path {:?} leaves the package's Data folder",
                root_item.path
            ),
        ));
    }
    let spec_rel = format!("Data/{}", root_item.path);
    if tree.file(&spec_rel).is_none() {
        return Err(CoremlError::malformed(
            &manifest_path,
            format!("the root model {spec_rel} is not a file of the package"),
        ));
    }
    let spec_path = root.join(&spec_rel);
    let bytes = run_dir::input::read(&spec_path, SPEC_LIMIT)?;
    let model = decode_spec(&bytes).map_err(|reason| CoremlError::malformed(&spec_path, reason))?;
    let Some(description) = &model.description else {
        return Err(CoremlError::malformed(
            &spec_path,
            "the specification has no model description (truncated?)",
        ));
    };
    let model_type = program::model_type(&model);
    let facts = model.ml_program.as_ref().map(program::facts);
    if let Some(facts) = &facts {
        // `@model_path` is the folder holding the specification.
        let model_dir = spec_rel.rsplit_once('/').map_or("", |(d, _)| d);
        for (name, max_offset) in &facts.blob_files {
            let rel = name
                .strip_prefix("@model_path/")
                .filter(|r| contained(r))
                .map(|r| format!("{model_dir}/{r}"))
                .ok_or_else(|| {
                    CoremlError::malformed(
                        &spec_path,
                        format!("the program names the weight file {name:?}, outside the package"),
                    )
                })?;
            match tree.file(&rel) {
                None => {
                    return Err(CoremlError::malformed(
                        root.join(&rel),
                        format!("the program's weight file {name} is missing from the package"),
                    ));
                }
                Some(f) if f.bytes <= *max_offset => {
                    return Err(CoremlError::malformed(
                        root.join(&rel),
                        format!(
                            "{} bytes, but the program reads a weight at offset {max_offset} (truncated?)",
                            f.bytes
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    let metadata = description
        .metadata
        .as_ref()
        .map(|m| m.user_defined.clone())
        .unwrap_or_default();
    let (operations, weights, opset) = match facts {
        Some(f) => (f.operations, Some(f.weights), f.opset),
        None => (BTreeMap::new(), None, None),
    };
    Ok(ModelReport {
        path: root.to_path_buf(),
        format: Format::Mlpackage,
        files: tree.files.len() as u64,
        directories: tree.directories,
        package_bytes: Some(tree.bytes()),
        compiled_bytes: None,
        spec_version: Some(i64::from(model.specification_version)),
        model_type,
        opset,
        inputs: description.input.iter().map(program::feature).collect(),
        outputs: description.output.iter().map(program::feature).collect(),
        weights,
        operations,
        metadata,
        not_read: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::{contained, decode_spec};
    use crate::program;

    /// The committed miniature encoder's specification (made by
    /// fixtures/coreml/build_encoder.py; see harness/tests/it/coreml.rs).
    const MINIATURE: &[u8] = include_bytes!(
        "../../../harness/tests/coreml/miniature-encoder.mlpackage/Data/com.apple.CoreML/model.mlmodel"
    );

    #[test]
    fn every_truncation_of_a_real_specification_is_refused_without_panicking() {
        let whole = decode_spec(MINIATURE).unwrap();
        let facts = program::facts(whole.ml_program.as_ref().unwrap());
        assert_eq!(facts.operations.get("softmax"), Some(&1));
        for len in 0..MINIATURE.len() {
            assert!(
                decode_spec(&MINIATURE[..len]).is_err(),
                "{len} bytes decoded"
            );
        }
    }

    #[test]
    fn damaged_bytes_never_panic() {
        // Every byte of the specification set to each of a few values:
        // decoding and reading the program fail or succeed, never panic.
        let mut bytes = MINIATURE.to_vec();
        for i in 0..bytes.len() {
            let saved = bytes[i];
            for v in [0x00, 0x7f, 0x80, 0xff] {
                bytes[i] = v;
                if let Ok(m) = decode_spec(&bytes) {
                    if let Some(p) = &m.ml_program {
                        let _ = program::facts(p);
                    }
                    if let Some(d) = &m.description {
                        let _: Vec<_> = d.input.iter().map(program::feature).collect();
                    }
                }
            }
            bytes[i] = saved;
        }
    }

    #[test]
    fn only_paths_inside_the_folder_are_contained() {
        assert!(contained("com.apple.CoreML/model.mlmodel"));
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/"] {
            assert!(!contained(bad), "{bad}");
        }
    }
}
