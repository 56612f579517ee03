//! The built `memqual-ct2` binary. This integration test is also why
//! `cargo test --workspace` builds the worker executable that the harness's
//! end-to-end tests (`harness/tests/it/ct2.rs`) run: cargo builds a
//! package's binaries for its integration tests.

use std::process::Command;

#[test]
fn the_worker_names_itself_its_runtime_and_what_it_can_do() {
    let out = Command::new(env!("CARGO_BIN_EXE_memqual-ct2"))
        .arg("--capabilities")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let caps: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(caps["worker"], "memqual-ct2");
    assert_eq!(caps["ct2rs"], "0.10.3");
    let list: Vec<&str> = caps["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(list.contains(&"ctranslate2"), "{list:?}");
    // whisper.cpp-only capabilities are not claimed: arms requiring them are NOT_RUNNABLE.
    assert!(!list.contains(&"extra_states"), "{list:?}");
    // A GPU backend is claimed exactly when the `cuda` feature built one in.
    assert_eq!(
        list.contains(&"backend:cuda"),
        cfg!(feature = "cuda"),
        "{list:?}"
    );
}
