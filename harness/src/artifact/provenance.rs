//! What a derivation receipt rests on besides its two files (seed 003 §3.2):
//! this memqual ([`Tool`], its executable hashed as `host.json` hashes it),
//! the focused tests that verify derivations ([`TestSource`], the source
//! files built into this binary), the runtime a derivative is made for
//! ([`CompatibleRuntime`], pinned by harness/build.rs from the patched
//! worker's package through the workers' own reading,
//! runners/runtime_source.rs) and the shared libraries this process runs
//! with ([`BinaryClosure`]).

use ggml_container::derive::{
    BinaryClosure, CompatibleRuntime, PatchDigest, Provenance, TestSource, Tool,
};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// The focused tests of derivations, by repository path, with what they
/// cover and their bytes. `include_bytes!` puts the very files into the
/// binary, so a changed test file rebuilds memqual and changes its digest.
const TESTS: [(&str, &str, &[u8]); 3] = [
    (
        "harness/tests/it/ggml/artifacts.rs",
        "the derive library: every byte of output and receipt bound, both kinds, defective sources",
        include_bytes!("../../tests/it/ggml/artifacts.rs"),
    ),
    (
        "harness/tests/it/artifact.rs",
        "`memqual artifact derive` and `verify-derivation` on the real binary, tampering, this provenance",
        include_bytes!("../../tests/it/artifact.rs"),
    ),
    (
        "runners/ggml-container/src/derive.rs",
        "the derivation itself and its unit tests (seal, closure forms, receipt versions)",
        include_bytes!("../../../runners/ggml-container/src/derive.rs"),
    ),
];

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// This memqual: version, commit, executable path and digest.
pub fn tool() -> Tool {
    let runtime = crate::host::runtime();
    Tool {
        name: "memqual".into(),
        version: runtime.memqual_version,
        commit: (crate::version::COMMIT != "unknown").then(|| crate::version::COMMIT.to_string()),
        executable: runtime.executable,
        executable_sha256: runtime.executable_sha256,
    }
}

/// The focused tests of derivations, as built into this binary.
pub fn verified_by() -> Vec<TestSource> {
    TESTS
        .iter()
        .map(|(path, covers, bytes)| TestSource {
            path: (*path).into(),
            covers: (*covers).into(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        })
        .collect()
}

/// The patched worker's runtime, as this build pinned it.
pub fn runtime() -> CompatibleRuntime {
    let list = |text: &str, sep: char| -> Vec<String> {
        text.split(sep)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    CompatibleRuntime {
        package: env!("MEMQUAL_COMPAT_PACKAGE").into(),
        source_crate: "whisper-rs-sys".into(),
        source_crate_version: env!("MEMQUAL_COMPAT_WHISPER_RS_SYS_VERSION").into(),
        source_checksum: env!("MEMQUAL_COMPAT_WHISPER_RS_SYS_CHECKSUM").into(),
        features: list(env!("MEMQUAL_COMPAT_FEATURES"), ','),
        patches: list(env!("MEMQUAL_COMPAT_PATCH_FILES"), ';')
            .iter()
            .filter_map(|f| f.split_once('='))
            .map(|(name, sha256)| PatchDigest {
                name: name.into(),
                sha256: sha256.into(),
            })
            .collect(),
        patch_set_digest: env!("MEMQUAL_COMPAT_PATCH_DIGEST").into(),
    }
}

/// Everything a derivation receipt records about its making. The executable
/// and its libraries are read once per process.
pub fn current() -> Provenance {
    static READ: OnceLock<(Tool, BinaryClosure)> = OnceLock::new();
    let (tool, binary_closure) = READ.get_or_init(|| (tool(), super::closure::binary_closure()));
    Provenance {
        made_by: format!("memqual {}", env!("CARGO_PKG_VERSION")),
        tool: tool.clone(),
        verified_by: verified_by(),
        runtime: runtime(),
        binary_closure: binary_closure.clone(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runtime_is_the_patched_worker_with_the_whole_patch_set() {
        let r = super::runtime();
        assert_eq!(r.package, "memqual-whisper-patched");
        assert_eq!(r.features, ["whisper-patch"]);
        // Every patch of the set and the one copied header, as the folder holds them.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runners/whisper-patch");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".patch") || n.ends_with(".h"))
            .collect();
        on_disk.sort();
        let mut named: Vec<String> = r.patches.iter().map(|p| p.name.clone()).collect();
        named.sort();
        assert_eq!(named, on_disk);
        assert_eq!(r.patch_set_digest.len(), 64);
        assert!(!r.source_crate_version.is_empty());
        let t = super::verified_by();
        assert_eq!(t.len(), 3);
        assert!(t.iter().all(|f| f.sha256.len() == 64 && f.bytes > 0));
    }
}
