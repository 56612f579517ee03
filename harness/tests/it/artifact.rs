//! `memqual artifact …`: the real binary on synthetic models (always) and on
//! the cached tiny.en (when `memqual fixtures model tiny.en` has run).

use crate::common::{MEMQUAL, tiny_en};
use ggml_container::synthetic::{SyntheticSpec, write_file};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn artifact(args: &[&str]) -> Output {
    Command::new(MEMQUAL)
        .arg("artifact")
        .args(args)
        .output()
        .expect("memqual runs")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn synthetic(dir: &Path) -> PathBuf {
    let path = dir.join("synthetic.bin");
    write_file(&SyntheticSpec::miniature(), &path).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn inspect_prints_the_inventory_and_rejects_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = synthetic(dir.path());
    let out = artifact(&["inspect", s(&model), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let inv = json(&out);
    assert_eq!(inv["tensors"].as_array().unwrap().len(), 50);
    assert_eq!(inv["totals"]["native_encoder"]["records"], 22);
    assert_eq!(inv["totals"]["decoder"]["records"], 28);
    assert_eq!(inv["ftype"]["weight_type"], "f16");
    assert_eq!(inv["tensors"][0]["name"], "encoder.positional_embedding");
    assert_eq!(inv["tensors"][0]["record_offset"], inv["prefix_len"]);

    let mut bytes = std::fs::read(&model).unwrap();
    let len = bytes.len();
    bytes.truncate(len - 1);
    let cut = dir.path().join("cut.bin");
    std::fs::write(&cut, bytes).unwrap();
    let out = artifact(&["inspect", s(&cut), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert_eq!(r["accepted"], false);
    assert_eq!(r["rejection"]["defect"]["kind"], "truncated");
    assert_eq!(r["rejection"]["record"], 49);
    assert_eq!(r["rejection"]["tensor"], "decoder.ln.bias");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tensor record 49 'decoder.ln.bias'"),
        "{stderr}"
    );
}

#[test]
fn derive_verify_and_tamper() {
    let dir = tempfile::tempdir().unwrap();
    let src = synthetic(dir.path());
    let out = dir.path().join("decoder.bin");
    let derived = artifact(&["derive-decoder", s(&src), s(&out), "--json"]);
    assert_eq!(derived.status.code(), Some(0));
    let receipt = json(&derived);
    assert_eq!(receipt["totals"]["removed_records"], 22);
    assert_eq!(
        receipt["made_by"],
        format!("memqual {}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        receipt["output"]["bytes"],
        std::fs::metadata(&out).unwrap().len()
    );
    let verified = artifact(&["verify-derivation", s(&src), s(&out)]);
    assert_eq!(verified.status.code(), Some(0));
    // The stripped file is rejected by the stock inventory, accepted as decoder-only.
    assert_eq!(artifact(&["inspect", s(&out)]).status.code(), Some(1));
    assert_eq!(
        artifact(&["inspect", "--decoder-only", s(&out)])
            .status
            .code(),
        Some(0)
    );
    // One flipped byte in the receipt.
    let rpath = dir.path().join("decoder.bin.derivation.json");
    let mut text = std::fs::read(&rpath).unwrap();
    let at = text.len() / 2;
    text[at] ^= 0x01;
    std::fs::write(&rpath, &text).unwrap();
    let tampered = artifact(&["verify-derivation", s(&src), s(&out), s(&rpath)]);
    assert_eq!(tampered.status.code(), Some(1));
}

fn sha256_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&bytes))
}

/// The receipt names what the derivation rests on (seed 003 §3.2), each
/// digest checked here against the file itself: this memqual, the focused
/// tests' sources, the patch set of the runtime it is made for, and the
/// shared libraries memqual ran with; a change to any is caught by the seal.
#[test]
fn the_receipt_names_the_tool_its_tests_the_runtime_and_the_closure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let src = synthetic(dir.path());
    let out = dir.path().join("encoder.bin");
    let derived = artifact(&["derive", "--encoder-only", s(&src), s(&out), "--json"]);
    assert_eq!(
        derived.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&derived.stderr)
    );
    let receipt = json(&derived);
    assert_eq!(receipt["receipt_version"], 2);
    let rpath = dir.path().join("encoder.bin.derivation.json");
    let sealed: Value = serde_json::from_slice(&std::fs::read(&rpath).unwrap()).unwrap();
    assert_eq!(sealed, receipt);

    // The tool: this very memqual binary.
    let tool = &receipt["tool"];
    assert_eq!(tool["name"], "memqual");
    assert_eq!(tool["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        tool["executable_sha256"],
        sha256_of(Path::new(crate::common::MEMQUAL))
    );
    assert_eq!(
        std::fs::canonicalize(tool["executable"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(crate::common::MEMQUAL).unwrap()
    );

    // The focused tests, as built into the binary, are the files on disk.
    let tests = receipt["verified_by"].as_array().unwrap();
    let paths: Vec<&str> = tests.iter().map(|t| t["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "harness/tests/it/ggml/artifacts.rs",
            "harness/tests/it/artifact.rs",
            "runners/ggml-container/src/derive.rs"
        ]
    );
    for t in tests {
        let file = root.join(t["path"].as_str().unwrap());
        assert_eq!(t["sha256"], sha256_of(&file), "{}", file.display());
        assert_eq!(t["bytes"], std::fs::metadata(&file).unwrap().len());
    }

    // The runtime: the patched worker, with every file of the patch set.
    let runtime = &receipt["runtime"];
    assert_eq!(runtime["package"], "memqual-whisper-patched");
    assert_eq!(runtime["source_crate"], "whisper-rs-sys");
    assert_eq!(runtime["features"], serde_json::json!(["whisper-patch"]));
    let patch_dir = root.join("runners/whisper-patch");
    let mut on_disk: Vec<String> = std::fs::read_dir(&patch_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "apply.cmake")
        .collect();
    on_disk.sort();
    let patches = runtime["patches"].as_array().unwrap();
    let mut named: Vec<String> = patches
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    named.sort();
    assert_eq!(named, on_disk);
    let mut set = String::new();
    for p in patches {
        let name = p["name"].as_str().unwrap();
        let sha = sha256_of(&patch_dir.join(name));
        assert_eq!(p["sha256"], sha, "{name}");
        set.push_str(&format!("{sha}  {name}\n"));
    }
    assert_eq!(
        runtime["patch_set_digest"],
        format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(set.as_bytes())
        )
    );

    // The binary closure: on Linux, libc among the libraries, its digest the file's.
    let closure = &receipt["binary_closure"];
    if cfg!(target_os = "linux") {
        assert_eq!(closure["status"], "recorded", "{closure}");
        assert_eq!(closure["method"], "/proc/self/maps");
        let libc = closure["libraries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["path"].as_str().unwrap().contains("libc.so"))
            .unwrap_or_else(|| panic!("no libc in {closure}"));
        let path = Path::new(libc["path"].as_str().unwrap());
        assert_eq!(libc["content"]["status"], "hashed", "{libc}");
        assert_eq!(libc["content"]["sha256"], sha256_of(path));
        assert_eq!(
            libc["content"]["bytes"],
            std::fs::metadata(path).unwrap().len()
        );
    } else {
        assert!(
            ["recorded", "unavailable"].contains(&closure["status"].as_str().unwrap()),
            "{closure}"
        );
    }

    // The human form names them too.
    let out2 = dir.path().join("encoder-2.bin");
    let human = artifact(&["derive", "--encoder-only", s(&src), s(&out2)]);
    assert_eq!(human.status.code(), Some(0));
    let said = String::from_utf8_lossy(&human.stdout);
    assert!(
        said.contains("verified by harness/tests/it/ggml/artifacts.rs"),
        "{said}"
    );
    assert!(
        said.contains("for memqual-whisper-patched: whisper-rs-sys"),
        "{said}"
    );
    assert!(said.contains("binary closure: "), "{said}");

    // Verified as written; a changed executable digest breaks the seal.
    assert_eq!(
        artifact(&["verify-derivation", s(&src), s(&out)])
            .status
            .code(),
        Some(0)
    );
    let text = std::fs::read_to_string(&rpath).unwrap();
    let digest = tool["executable_sha256"].as_str().unwrap();
    let other: String = digest
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    assert_eq!(text.matches(digest).count(), 1);
    std::fs::write(&rpath, text.replace(digest, &other)).unwrap();
    let tampered = artifact(&["verify-derivation", s(&src), s(&out), "--json"]);
    assert_eq!(tampered.status.code(), Some(1));
    let why = json(&tampered);
    assert_eq!(why["accepted"], false);
    assert!(
        why["reason"]
            .as_str()
            .unwrap()
            .contains("receipt_sha256 does not match"),
        "{why}"
    );
    // A version 1 receipt (no provenance) is refused, saying why.
    std::fs::write(
        &rpath,
        text.replacen("\"receipt_version\": 2", "\"receipt_version\": 1", 1),
    )
    .unwrap();
    let old = artifact(&["verify-derivation", s(&src), s(&out)]);
    assert_eq!(old.status.code(), Some(1));
    let said = String::from_utf8_lossy(&old.stderr);
    assert!(
        said.contains("receipt_version 1 predates version 2")
            && said.contains("derive the artifact again"),
        "{said}"
    );
}

#[test]
fn corpus_cases_are_each_rejected_by_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let src = synthetic(dir.path());
    let corpus = dir.path().join("corpus");
    let out = artifact(&["corpus", s(&src), s(&corpus), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let manifest = json(&out);
    let cases = manifest["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 13);
    for case in cases {
        let file = corpus.join(case["file"].as_str().unwrap());
        let mut args = vec!["inspect", s(&file), "--json"];
        if case["expect"] == "decoder_only" {
            args.push("--decoder-only");
        }
        let out = artifact(&args);
        assert_eq!(out.status.code(), Some(1), "{}", case["case"]);
        let r = json(&out);
        assert_eq!(
            r["rejection"]["defect"]["kind"], case["rejection"]["defect"],
            "{}",
            case["case"]
        );
        assert_eq!(r["rejection"]["offset"], case["rejection"]["offset"]);
        assert_eq!(r["rejection"]["record"], case["rejection"]["record"]);
    }
}

#[test]
fn estimate_matches_the_sizes_whisper_cpp_logs_for_tiny_en() {
    let model = tiny_en();
    let out = artifact(&["estimate", s(&model), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let e = json(&out);
    // whisper_init_state on tiny.en logs kv self 3.15 MB, cross 9.44 MB, pad 2.36 MB.
    assert_eq!(e["kv_self_bytes"], 3_145_728);
    assert_eq!(e["kv_cross_bytes"], 9_437_184);
    assert_eq!(e["kv_pad_bytes"], 2_359_296);
    assert_eq!(e["logits_reserve_bytes"], 51864u64 * 448 * 4);
    assert_eq!(e["native_encoder_weight_bytes"], 17_608_704);
    assert_eq!(e["decoder_weight_bytes"], 59_501_568);
    let beams = json(&artifact(&[
        "estimate",
        s(&model),
        "--beams",
        "5",
        "--json",
    ]));
    assert_eq!(beams["kv_self_bytes"], 7 * 3_145_728);
}

#[test]
fn tiny_en_q5_0_has_the_reference_digest() {
    let model = tiny_en();
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q5_0.bin");
    let out = artifact(&["quantize", s(&model), s(&q), "--type", "q5_0", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json(&out);
    assert_eq!(
        summary["output"]["file_sha256"],
        "1ff1e7c8ed918010d9a7ae317f8891f8d7f02e7a6db13af61f5d67cb985012f6"
    );
    assert_eq!(summary["output"]["file_len"], 29_889_210);
    assert_eq!(summary["ftype"]["raw"], 2008);
}

#[test]
fn derive_encoder_only_inspect_refuses_the_wrong_expectation_and_estimate_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = synthetic(dir.path());
    let out = dir.path().join("encoder.bin");
    // A kind is required.
    assert_eq!(
        artifact(&["derive", s(&src), s(&out)]).status.code(),
        Some(2)
    );
    assert!(!out.exists());
    let derived = artifact(&["derive", "--encoder-only", s(&src), s(&out), "--json"]);
    assert_eq!(derived.status.code(), Some(0));
    let receipt = json(&derived);
    assert_eq!(receipt["totals"]["retained_records"], 22);
    assert_eq!(receipt["totals"]["removed_records"], 28);
    assert!(
        receipt["derivation"]
            .as_str()
            .unwrap()
            .starts_with("encoder-only:")
    );
    let human = artifact(&["verify-derivation", s(&src), s(&out)]);
    assert_eq!(human.status.code(), Some(0));
    let said = String::from_utf8_lossy(&human.stdout);
    assert!(said.contains("minus 28 decoder records"), "{said}");
    // Accepted only as encoder-only; the full and decoder-only inventories refuse it.
    let as_encoder = artifact(&["inspect", "--encoder-only", s(&out), "--json"]);
    assert_eq!(as_encoder.status.code(), Some(0));
    assert_eq!(json(&as_encoder)["expect"], "encoder_only");
    let as_full = artifact(&["inspect", s(&out), "--json"]);
    assert_eq!(as_full.status.code(), Some(1));
    assert_eq!(
        json(&as_full)["rejection"]["defect"]["kind"],
        "missing_tensors"
    );
    let hint = String::from_utf8_lossy(&as_full.stderr);
    assert!(hint.contains("--encoder-only"), "{hint}");
    let as_decoder = artifact(&["inspect", "--decoder-only", s(&out), "--json"]);
    assert_eq!(as_decoder.status.code(), Some(1));
    assert_eq!(
        json(&as_decoder)["rejection"]["defect"]["kind"],
        "unknown_tensor"
    );
    // The full model is not encoder-only either.
    assert_eq!(
        artifact(&["inspect", "--encoder-only", s(&src)])
            .status
            .code(),
        Some(1)
    );
    // estimate takes the derivative: the header's state, no decoder weights.
    let e = artifact(&["estimate", s(&out), "--json"]);
    assert_eq!(e.status.code(), Some(0));
    let e = json(&e);
    assert_eq!(e["decoder_weight_bytes"], 0);
    assert_eq!(e["logits_reserve_bytes"], 64 * 8 * 4); // miniature: n_vocab 64, n_text_ctx 8
}

#[test]
fn fixtures_synthetic_presets_print_their_digest_and_the_default_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(MEMQUAL)
            .arg("fixtures")
            .arg("synthetic")
            .args(args)
            .output()
            .expect("memqual runs")
    };
    let plain = dir.path().join("plain.bin");
    let named = dir.path().join("named.bin");
    assert!(run(&[s(&plain)]).status.success());
    let out = run(&[s(&named), "--preset", "loadable", "--seed", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&named).unwrap();
    assert_eq!(bytes, std::fs::read(&plain).unwrap());
    assert_eq!(
        bytes,
        ggml_container::synthetic::to_bytes(&SyntheticSpec::loadable()).unwrap()
    );
    let said = String::from_utf8_lossy(&out.stdout);
    let digest = ggml_container::digest::sha256_file(&named).unwrap();
    assert!(
        said.contains(&format!("{} bytes, SHA-256 {digest}", bytes.len())),
        "{said}"
    );
    // Not over an existing file, and not an unknown preset.
    assert_eq!(run(&[s(&named)]).status.code(), Some(3));
    assert_eq!(
        run(&[s(&dir.path().join("x.bin")), "--preset", "turbo"])
            .status
            .code(),
        Some(2)
    );
}
