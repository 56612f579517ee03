//! The deletion-first ladder's stages 2-4 on memqual's patched whisper.cpp
//! (`memqual-whisper-patched`, built by [`patched_worker`]), run through the
//! real `memqual` on the real tiny.en and base models:
//! - external-encoder-only loading removes exactly the native encoder's
//!   weight bytes from the worker, with the stock tokens;
//! - the patched loader refuses every defective encoder record (truncated,
//!   overflowing, unknown, duplicate, missing, mis-shaped, mistyped, a bad
//!   record header) with whisper.cpp's own error naming the tensor;
//! - a defective external encoder (failure, wrong shape, short buffer, a
//!   tensor one position short) fails the request closed;
//! - an encoder process that dies (each signal, an exit), hangs or sends a
//!   malformed ready line or reply header, at each phase of its life, fails
//!   the arm closed (at load before its ready line), the worker naming how
//!   it ended and where, and leaving no process behind; and it never
//!   outlives `memqual`, interrupted or killed;
//! - a bounded state sizes its caches from the bound, keeps the tokens, and
//!   refuses a request beyond it.
//! - an encoder process told `encoder_only` holds the encoder-only artifact
//!   and an encoder-sized state alone, keeps the stock tokens, and with the
//!   worker holds what stock holds plus its own start-up baseline; told
//!   `encoder_only` it refuses a full model, told `full` an encoder-only one.

use crate::common::*;
use ggml_container::{Expect, inspect};
use reports::record::ArmStatus;
use std::path::{Path, PathBuf};

/// One arm of the patched runtime with the external encoder on `model`.
fn external_arm(id: &str, model: &str, extra: &str) -> String {
    format!(
        "[[arm]]\nid = \"{id}\"\n[arm.whisper]\nmodel = \"{model}\"\nruntime = \"whisper_cpp_patched\"\n\
         encoder = \"external_process\"\nfixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0\n\
         temperature_fallback = false\n{extra}\n"
    )
}

fn worker_log(run: &Path, arm: &str) -> String {
    std::fs::read_to_string(run.join("arms").join(arm).join("worker.log")).unwrap_or_default()
}

fn tokens(run: &Path, arm: &str) -> Vec<(String, Vec<i32>)> {
    results(&run.join("arms").join(arm))
        .into_iter()
        .map(|r| match r.body {
            worker_contract::ResultBody::Transcription(t) => (t.fixture_id, t.tokens),
            other => panic!("{arm}: not a transcription: {other:?}"),
        })
        .collect()
}

fn marker_resident(run: &Path, arm: &str, phase: sampler::Phase) -> u64 {
    markers(&run.join("arms").join(arm))
        .iter()
        .find(|m| m.phase == phase)
        .unwrap_or_else(|| panic!("{arm}: no {phase:?} marker"))
        .memory
        .resident_bytes
}

fn estimate(model: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["artifact", "estimate", model.to_str().unwrap(), "--json"];
    args.extend(extra);
    let out = memqual(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn external_encoder_only_loading_keeps_the_stock_tokens_and_drops_the_encoder_weights() {
    patched_worker();
    for name in ["tiny.en", "base"] {
        let model = model(name);
        let body = format!(
            "[[arm]]\nid = \"stock\"\n[arm.whisper]\nmodel = \"{name}\"\nfixtures = [\"s1\", \"s2\"]\n\
             warmup = 0\nidle_s = 0\ntemperature_fallback = false\n{}{LENIENT_ADMISSION}",
            external_arm(
                "external",
                name,
                "fixtures = [\"s1\", \"s2\"]\nexternal_encoder = {}"
            )
            .replace("fixtures = [\"s1\"]\n", "")
        );
        let r = run_protocol_body("run", &body, &["--json"]);
        assert_eq!(r.out.status.code(), Some(0), "{name}: {}", stderr(&r.out));
        let receipt = receipt(&r.dir);
        assert!(
            receipt
                .arms
                .iter()
                .all(|a| a.status == ArmStatus::Completed)
        );

        // The patched build names its sources and every file of the patch
        // set, each digest recomputed here from the files on disk.
        let external_arm = receipt.arms.iter().find(|a| a.id == "external").unwrap();
        let build = external_arm
            .speech
            .as_ref()
            .unwrap()
            .runtime
            .as_ref()
            .unwrap()
            .build
            .clone();
        let build = build.expect("the patched worker reports its build");
        let (version, checksum) =
            crate::whisper::locked_package("runners/patched/Cargo.lock", "whisper-rs-sys");
        assert_eq!(
            (build.source_crate_version, build.source_checksum),
            (version, checksum)
        );
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runners/whisper-patch");
        let names: Vec<&str> = build.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "0001-external-encoder-only.patch",
                "0002-bounded-state.patch",
                "0003-coreml-fail-closed.patch",
                "0004-encoder-only-process.patch",
                "0005-lean-encoder-pair.patch",
                "0006-coreml-placement.patch",
                "whisper-memqual-output.h",
                "whisper-memqual-placement.h"
            ]
        );
        let mut manifest = String::new();
        for p in &build.patches {
            use sha2::Digest;
            let sha = format!(
                "{:x}",
                sha2::Sha256::digest(std::fs::read(dir.join(&p.name)).unwrap())
            );
            assert_eq!(p.sha256, sha, "{}", p.name);
            manifest.push_str(&format!("{sha}  {}\n", p.name));
        }
        use sha2::Digest;
        let set = format!("{:x}", sha2::Sha256::digest(manifest.as_bytes()));
        assert_eq!(build.patch_set_digest.as_deref(), Some(set.as_str()));

        // Exact token parity with stock whisper.cpp.
        let (stock, external) = (tokens(&r.dir, "stock"), tokens(&r.dir, "external"));
        assert_eq!(stock.len(), 2);
        assert_eq!(stock, external, "{name}");

        // The patch logged what it discarded, exactly the estimate's encoder bytes.
        let predicted = estimate(&model, &[])["native_encoder_weight_bytes"]
            .as_u64()
            .unwrap();
        let log = worker_log(&r.dir, "external");
        let discarded = format!("({:.2} MB), none allocated", predicted as f64 / 1e6);
        assert!(
            log.contains(&discarded),
            "{name}: no `{discarded}` in {log}"
        );
        assert!(log.contains("external encoder: process"), "{log}");

        // Measured: resident at model_loaded falls by the encoder's weights.
        // Margin 15 %: the allocator rounds and the heap holds other small
        // things; tiny.en measured 16.8 MiB against 16.79 MiB predicted.
        let drop = marker_resident(&r.dir, "stock", sampler::Phase::ModelLoaded) as f64
            - marker_resident(&r.dir, "external", sampler::Phase::ModelLoaded) as f64;
        let ratio = drop / predicted as f64;
        assert!(
            (0.85..=1.15).contains(&ratio),
            "{name}: resident fell {:.1} MiB, the encoder weighs {:.1} MiB",
            drop / MIB,
            predicted as f64 / MIB
        );
    }
}

/// A copy of `src` with `edit` applied to its bytes.
fn defective(dir: &Path, name: &str, src: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = src.to_vec();
    edit(&mut bytes);
    let path = dir.join(format!("{name}.bin"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn put_i32(bytes: &mut [u8], at: u64, v: i32) {
    let at = at as usize;
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn the_patched_loader_refuses_every_defective_encoder_record() {
    patched_worker();
    let tiny = model("tiny.en");
    let src = std::fs::read(&tiny).unwrap();
    let inv = inspect(&tiny, Expect::Full).unwrap();
    let rec = |name: &str| {
        inv.tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    // Record layout: n_dims, name length, type, dims (i32 each), name, payload.
    let name_at = |t: &ggml_container::TensorRecord| t.payload_offset - t.name.len() as u64;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mlp0 = rec("encoder.blocks.1.mlp.0.weight");
    let key = rec("encoder.blocks.0.attn.key.weight");
    let ln1 = rec("encoder.blocks.1.mlp_ln.weight");
    let ln0 = rec("encoder.blocks.0.mlp_ln.weight");
    let post = rec("encoder.ln_post.bias");
    let after_post = inv.tensors[post.index + 1].record_offset;
    let pe = rec("encoder.positional_embedding");
    let cases: Vec<(&str, PathBuf, String)> = vec![
        (
            "truncated",
            defective(d, "truncated", &src, |b| {
                b.truncate((mlp0.payload_offset + mlp0.payload_len / 2) as usize)
            }),
            format!(
                "model file ends inside encoder tensor 'encoder.blocks.1.mlp.0.weight' ({} of {} bytes missing)",
                mlp0.payload_len - mlp0.payload_len / 2,
                mlp0.payload_len
            ),
        ),
        (
            "unknown",
            defective(d, "unknown", &src, |b| {
                let at = name_at(&key) as usize + "encoder.blocks.0.attn.ke".len();
                b[at] = b'z';
            }),
            "unknown tensor 'encoder.blocks.0.attn.kez.weight'".into(),
        ),
        (
            "duplicate",
            defective(d, "duplicate", &src, |b| {
                let at = name_at(&ln1) as usize + "encoder.blocks.".len();
                b[at] = b'0';
            }),
            "duplicate encoder tensor 'encoder.blocks.0.mlp_ln.weight'".into(),
        ),
        (
            "missing",
            defective(d, "missing", &src, |b| {
                b.drain(post.record_offset as usize..after_post as usize);
            }),
            "encoder tensor 'encoder.ln_post.bias' missing from the model file (66 of 67 present)".into(),
        ),
        (
            "misshaped",
            defective(d, "misshaped", &src, |b| {
                put_i32(b, mlp0.record_offset + 12, 1536);
                put_i32(b, mlp0.record_offset + 16, 384);
            }),
            "encoder tensor 'encoder.blocks.1.mlp.0.weight' has shape [1536, 384, 1, 1], expected [384, 1536, 1, 1]".into(),
        ),
        (
            "mistyped",
            defective(d, "mistyped", &src, |b| put_i32(b, ln0.record_offset + 8, 1)),
            "encoder tensor 'encoder.blocks.0.mlp_ln.weight' has type f16, expected f32".into(),
        ),
        (
            "bad-record-header",
            defective(d, "bad-record-header", &src, |b| put_i32(b, key.record_offset, 7)),
            "declares 7 dimensions".into(),
        ),
        (
            // n_audio_state = 2^31 - 1 in the header, and a first record
            // declaring conv2's shape for it, [3, S, S] f16: its byte size
            // does not fit 64 bits and must be refused before a byte is read.
            "overflow",
            defective(d, "overflow", &src, |b| {
                let s = i32::MAX;
                put_i32(b, 12, s);
                let at = pe.record_offset;
                let name = b"encoder.conv2.weight";
                let mut head = Vec::new();
                for v in [3i32, name.len() as i32, 1, 3, s, s] {
                    head.extend_from_slice(&v.to_le_bytes());
                }
                head.extend_from_slice(name);
                b.splice(at as usize..pe.payload_offset as usize, head);
            }),
            "encoder tensor 'encoder.conv2.weight' declares a size that overflows".into(),
        ),
    ];
    let mut body = String::new();
    for (id, file, _) in &cases {
        body.push_str(&external_arm(
            id,
            &file.display().to_string(),
            "prevalidate_model = false\nexternal_encoder = { model = \"tiny.en\" }",
        ));
    }
    body.push_str(LENIENT_ADMISSION);
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for (id, _, expected) in &cases {
        let arm = receipt.arms.iter().find(|a| a.id == *id).unwrap();
        assert_eq!(arm.status, ArmStatus::Failed, "{id}");
        let log = worker_log(&r.dir, id);
        assert!(log.contains(expected), "{id}: no `{expected}` in\n{log}");
        // Refused at the record, before the rest of the file; a missing
        // tensor can only show after the last record.
        assert_eq!(
            log.contains("model size    ="),
            *id == "missing",
            "{id}: where the loader stopped"
        );
    }
}

#[test]
fn a_defective_external_encoder_fails_the_request_closed() {
    patched_worker();
    let cases = [
        (
            "fail",
            "the external encoder failed (-30): injected failure",
        ),
        // The patch's shared output checks (whisper-memqual-output.h), the
        // same ones the Core ML glue applies; outermost dimension first.
        (
            "wrong_shape",
            "the output has shape [384, 1500], expected [n_ctx 1500, n_state 384]",
        ),
        (
            "short_buffer",
            "exited with status 1 in the middle of its reply (1152000 of 2304000 bytes came)",
        ),
        (
            "small_tensor",
            "the output has shape [1499, 384], expected [n_ctx 1500, n_state 384]",
        ),
    ];
    let mut body = String::new();
    for (fault, _) in cases {
        body.push_str(&external_arm(
            fault,
            "tiny.en",
            &format!("external_encoder = {{ model = \"tiny.en\", fault = \"{fault}\" }}"),
        ));
    }
    // The loader's capability is never a label on a native-encoder arm.
    body.push_str(
        "[[arm]]\nid = \"labelled\"\n[arm.whisper]\nmodel = \"tiny.en\"\n\
         runtime = \"whisper_cpp_patched\"\nfixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0\n\
         requires = [\"loader:external_encoder_only\"]\n",
    );
    body.push_str(LENIENT_ADMISSION);
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for (fault, expected) in cases {
        let arm = receipt.arms.iter().find(|a| a.id == fault).unwrap();
        assert_eq!(arm.status, ArmStatus::Failed, "{fault}");
        assert!(
            results(&r.dir.join("arms").join(fault)).is_empty(),
            "{fault}: a result was sent"
        );
        let log = worker_log(&r.dir, fault);
        assert!(log.contains(expected), "{fault}: no `{expected}` in\n{log}");
        assert!(
            arm.failure
                .iter()
                .any(|f| f.contains("whisper_full failed")),
            "{fault}: {:?}",
            arm.failure
        );
    }
    let labelled = receipt.arms.iter().find(|a| a.id == "labelled").unwrap();
    assert_eq!(labelled.status, ArmStatus::NotRunnable);
    assert!(
        labelled.failure.iter().any(|f| f
            .contains("external-encoder-only loading runs with encoder = \"external_process\"")),
        "{:?}",
        labelled.failure
    );
}

/// The pid of the encoder process the worker of `arm` started (its log says
/// so before the process is ready).
fn encoder_pid(run: &Path, arm: &str) -> Option<u32> {
    let log = worker_log(run, arm);
    let at = log.find("external encoder: started process ")? + 34;
    log[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Whether `pid` runs (Linux: `/proc/<pid>/stat`, a zombie counts as
/// dead; elsewhere: whether signal 0 reaches it).
fn running(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .is_some_and(|state| state != "Z" && state != "X")
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
    }
}

/// Whether `pid` is gone altogether: neither running nor a zombie (Linux;
/// elsewhere, not running).
fn reaped(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        !Path::new(&format!("/proc/{pid}")).exists()
    } else {
        !running(pid)
    }
}

#[test]
fn an_encoder_process_that_dies_hangs_or_talks_garbage_at_any_phase_fails_the_arm_closed() {
    patched_worker();
    let signal =
        |at: &str, sig: &str| format!("{{ at = \"{at}\", do = \"signal\", signal = \"{sig}\" }}");
    let exit = |at: &str| format!("{{ at = \"{at}\", do = \"exit\", code = 3 }}");
    let hang = |at: &str| format!("{{ at = \"{at}\", do = \"hang\" }}");
    let bad = |what: &str, which: &str| format!("{{ do = \"bad_{what}\", {what} = \"{which}\" }}");
    // Where the worker was when it noticed, phase by phase; a process that
    // is gone before its ready line fails the arm at load.
    let ready = "while the worker waited for its ready line";
    let send = "while the worker sent it a window";
    let reply = "while the worker waited for its reply";
    // audio_ctx = 256: a [384, 256] float32 output, half of it sent.
    let half = "in the middle of its reply (196608 of 393216 bytes came)";
    // (arm, fault, what the worker says on a line naming the process's pid,
    // whether the arm fails at load)
    let mut cases: Vec<(String, String, String, bool)> = Vec::new();
    // Every phase: SIGKILL, a catchable signal (its default action) and an exit.
    for (phase, sig, n, when, at_load) in [
        ("process_start", "TERM", 15, ready, true),
        ("model_loaded", "SEGV", 11, ready, true),
        ("state_ready", "ABRT", 6, ready, true),
        ("ready", "TERM", 15, send, false),
        ("mid_encode", "SEGV", 11, reply, false),
        ("mid_reply", "ABRT", 6, half, false),
    ] {
        for (what, fault, says) in [
            (
                "kill",
                signal(phase, "KILL"),
                "was killed by signal 9 (SIGKILL)".to_string(),
            ),
            (
                sig,
                signal(phase, sig),
                format!("was killed by signal {n} (SIG{sig})"),
            ),
            ("exit", exit(phase), "exited with status 3".to_string()),
        ] {
            let id = format!("{phase}_{}", what.to_lowercase());
            cases.push((id, fault, format!("{says} {when}"), at_load));
        }
    }
    // A hang before the ready line, and at each step of a window.
    for (phase, when, at_load) in [
        ("state_ready", ready, true),
        ("ready", send, false),
        ("mid_encode", reply, false),
        ("mid_reply", half, false),
    ] {
        let says = format!("did not answer within 3 s {when}; the worker killed it");
        cases.push((format!("{phase}_hang"), hang(phase), says, at_load));
    }
    let ready_says = [
        (
            "not_json",
            "answered \"the encoder is ready\", not its ready line: expected ident at line 1 \
             column 2; the worker stopped it"
                .to_string(),
        ),
        (
            "unknown_field",
            "not its ready line: unknown field `surprise`".into(),
        ),
        (
            "wrong_type",
            r#"answered "{\"error\":null,\"model_sha256\":42}", not its ready line: invalid type: integer `42`, expected a string"#.into(),
        ),
        (
            "missing_digest",
            "said it was ready without its model's SHA-256; the worker stopped it".into(),
        ),
        (
            "wrong_digest",
            format!("checked a model of SHA-256 \"{}\", not the arm's ", "0".repeat(64)),
        ),
        (
            "truncated",
            "closed its output in the middle of its ready line (".into(),
        ),
    ];
    for (which, says) in ready_says {
        cases.push((format!("ready_{which}"), bad("ready", which), says, true));
    }
    for (which, says) in [
        (
            "garbage",
            "the external encoder's reply does not start with MQEO; the worker stopped the \
             external encoder process (pid",
        ),
        (
            "huge",
            "the external encoder announced 18446744073709551615 bytes; a [384, 256] float32 \
             output has 393216; the worker stopped the external encoder process (pid",
        ),
        (
            "truncated",
            "closed its output in the middle of its reply's header (44 of 88 bytes came) but \
             kept running; the worker killed it",
        ),
    ] {
        cases.push((
            format!("header_{which}"),
            bad("header", which),
            says.into(),
            false,
        ));
    }
    let mut body = String::new();
    for (id, fault, _, _) in &cases {
        // Hangs are bounded by the worker's own timeout, well below the arm's.
        let timeout = if fault.contains("hang") {
            ", timeout_s = 3"
        } else {
            ""
        };
        body.push_str(&external_arm(
            id,
            "tiny.en",
            &format!("audio_ctx = 256\nexternal_encoder = {{ model = \"tiny.en\", fault = {fault}{timeout} }}"),
        ));
    }
    body.push_str(LENIENT_ADMISSION);
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for (id, _, says, at_load) in &cases {
        let arm = receipt.arms.iter().find(|a| a.id == *id).unwrap();
        assert_eq!(arm.status, ArmStatus::Failed, "{id}");
        let dir = r.dir.join("arms").join(id);
        assert!(results(&dir).is_empty(), "{id}: a result was sent");
        let log = worker_log(&r.dir, id);
        let pid =
            encoder_pid(&r.dir, id).unwrap_or_else(|| panic!("{id}: no encoder pid in\n{log}"));
        // One line names the process and says what happened to it.
        assert!(
            log.lines()
                .any(|l| l.contains(says.as_str()) && l.contains(&format!("(pid {pid})"))),
            "{id}: no `{says}` naming pid {pid} in\n{log}"
        );
        for generic in ["Broken pipe", "os error 32", "failed to fill whole buffer"] {
            assert!(!log.contains(generic), "{id}: `{generic}` in\n{log}");
        }
        // Gone before its ready line: the arm fails at load, never reaching
        // state_ready or a request; after it, the request fails.
        let phases: Vec<_> = markers(&dir).iter().map(|m| m.phase).collect();
        if *at_load {
            assert_eq!(
                phases.last(),
                Some(&sampler::Phase::ModelLoaded),
                "{id}: {phases:?}"
            );
            assert!(
                !arm.failure.iter().any(|f| f.contains("request 0")),
                "{id}: {:?}",
                arm.failure
            );
        } else {
            assert!(
                phases.contains(&sampler::Phase::RequestBegin),
                "{id}: {phases:?}"
            );
            assert!(
                arm.failure
                    .iter()
                    .any(|f| f.contains("request 0 on s1: whisper_full failed")),
                "{id}: {:?}",
                arm.failure
            );
        }
        // The worker reaped it: no orphan, no zombie.
        assert!(reaped(pid), "{id}: encoder process {pid} is still there");
    }
}

/// Poll (no fixed sleep decides) until `f` holds; `what` says what never
/// happened when the bound runs out.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed().as_secs() < 120, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_encoder_process_never_outlives_memqual() {
    patched_worker();
    for (how, extra) in [
        // Interrupted during the arm's idle: memqual kills the worker's
        // process group, the encoder included, and still writes a receipt.
        ("SIGTERM", "idle_s = 120\nexternal_encoder = {}"),
        // Killed while the encoder hangs (reading nothing): the lifeline ends
        // the worker, and the worker's death ends the encoder.
        (
            "SIGKILL",
            "external_encoder = { fault = { at = \"ready\", do = \"hang\" }, timeout_s = 600 }",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut body = external_arm("arm", "tiny.en", extra);
        if extra.contains("idle_s") {
            body = body.replace("idle_s = 0\n", "");
        }
        let protocol = write_protocol(tmp.path(), &format!("{body}{LENIENT_ADMISSION}"));
        let run = tmp.path().join("run");
        let child = spawn_memqual(&[
            "run",
            protocol.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
            "--force",
        ]);
        let mut pid = None;
        wait_until(
            &format!("{how}: the encoder process never became ready"),
            || {
                pid = encoder_pid(&run, "arm")
                    .filter(|_| worker_log(&run, "arm").contains("runs the native encoder"));
                pid.is_some()
            },
        );
        let pid = pid.unwrap();
        assert!(running(pid), "{how}: encoder {pid} is not running");
        let signal = match how {
            "SIGTERM" => nix::sys::signal::Signal::SIGTERM,
            _ => nix::sys::signal::Signal::SIGKILL,
        };
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let out = child.wait_with_output().unwrap();
        match how {
            "SIGTERM" => assert_eq!(out.status.code(), Some(130), "{}", stderr(&out)),
            _ => {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(out.status.signal(), Some(9));
            }
        }
        wait_until(
            &format!("{how}: encoder process {pid} outlived memqual"),
            || !running(pid),
        );
        if how == "SIGTERM" {
            let receipt = receipt(&run);
            let arm = &receipt.arms[0];
            assert_eq!(arm.status, ArmStatus::Failed);
            assert!(
                arm.failure[0].starts_with("interrupted"),
                "{:?}",
                arm.failure
            );
        }
    }
}

#[test]
fn a_bounded_state_sizes_its_caches_from_the_bound_and_refuses_a_longer_input() {
    patched_worker();
    let tiny = model("tiny.en");
    let bounded = "state_bounds = { max_audio_ctx = 768, max_batch = 8 }";
    let body = format!(
        "{}{}{}{}{LENIENT_ADMISSION}",
        external_arm(
            "control",
            "tiny.en",
            "audio_ctx = 768\nexternal_encoder = {}"
        ),
        external_arm(
            "bounded",
            "tiny.en",
            &format!("audio_ctx = 768\nexternal_encoder = {{}}\n{bounded}")
        ),
        // The whole 1500-position window against a 768-position state.
        external_arm(
            "beyond",
            "tiny.en",
            &format!("external_encoder = {{}}\n{bounded}")
        ),
        // The prompt alone is two tokens.
        external_arm(
            "batch",
            "tiny.en",
            "audio_ctx = 768\nexternal_encoder = {}\nstate_bounds = { max_audio_ctx = 768, max_batch = 1 }"
        ),
    );
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let status = |id: &str| receipt.arms.iter().find(|a| a.id == id).unwrap().status;
    assert_eq!(status("control"), ArmStatus::Completed);
    assert_eq!(status("bounded"), ArmStatus::Completed);
    assert_eq!(tokens(&r.dir, "control"), tokens(&r.dir, "bounded"));

    // Logged cache sizes are the estimate's, stock and bounded. The pad
    // cache serves the native encoder's graph alone: a worker whose encoder
    // runs in another process allocates none (patch 0004).
    let stock = estimate(&tiny, &[]);
    let small = estimate(&tiny, &["--audio-ctx", "768", "--max-batch", "8"]);
    for (arm, e) in [("control", &stock), ("bounded", &small)] {
        let log = worker_log(&r.dir, arm);
        let want = format!(
            "kv cross size = {:7.2} MB",
            e["kv_cross_bytes"].as_u64().unwrap() as f64 / 1e6
        );
        assert!(log.contains(&want), "{arm}: no `{want}` in\n{log}");
        assert!(
            !log.contains("kv pad  size"),
            "{arm}: a pad cache in\n{log}"
        );
    }
    // Measured at state_ready: the caches' saving, within a wide margin
    // (the compute buffers shrink too, and the allocator rounds).
    let predicted =
        stock["kv_cross_bytes"].as_u64().unwrap() - small["kv_cross_bytes"].as_u64().unwrap();
    let saved = marker_resident(&r.dir, "control", sampler::Phase::StateReady) as f64
        - marker_resident(&r.dir, "bounded", sampler::Phase::StateReady) as f64;
    assert!(
        saved >= 0.8 * predicted as f64,
        "state_ready fell {:.2} MiB; the caches alone predict {:.2} MiB",
        saved / MIB,
        predicted as f64 / MIB
    );

    for (id, expected) in [
        (
            "beyond",
            "1500 encoder positions exceed this state's bound of 768: refused, never truncated",
        ),
        (
            "batch",
            "a batch of 2 tokens exceeds this state's bound of 1",
        ),
    ] {
        assert_eq!(status(id), ArmStatus::Failed, "{id}");
        let log = worker_log(&r.dir, id);
        assert!(log.contains(expected), "{id}: no `{expected}` in\n{log}");
    }
}

/// The encoder process's own memory at `step` (`model_loaded`, …), `field`.
fn encoder_step(receipt: &reports::receipt::Receipt, arm: &str, step: &str, field: &str) -> u64 {
    let a = receipt.arms.iter().find(|a| a.id == arm).unwrap();
    let json = serde_json::to_value(a).unwrap();
    json.pointer(&format!(
        "/speech/runtime/external_encoder/memory/{step}/{field}"
    ))
    .and_then(serde_json::Value::as_u64)
    .unwrap_or_else(|| panic!("{arm}: no encoder {step} {field}"))
}

fn marker_footprint(run: &Path, arm: &str, phase: sampler::Phase) -> u64 {
    markers(&run.join("arms").join(arm))
        .iter()
        .find(|m| m.phase == phase)
        .and_then(|m| m.memory.footprint_bytes)
        .unwrap_or_else(|| panic!("{arm}: no {phase:?} footprint"))
}

#[test]
fn an_encoder_only_process_holds_the_encoder_alone_and_refuses_the_wrong_file() {
    patched_worker();
    let tiny = model("tiny.en");
    let dir = tempfile::tempdir().unwrap();
    let encoder = dir.path().join("ggml-tiny.en-encoder-f16.bin");
    let derived = memqual(&[
        "artifact",
        "derive",
        "--encoder-only",
        tiny.to_str().unwrap(),
        encoder.to_str().unwrap(),
    ]);
    assert!(derived.status.success(), "{}", stderr(&derived));
    let enc = encoder.display();
    let body = format!(
        "[[arm]]\nid = \"stock\"\n[arm.whisper]\nmodel = \"tiny.en\"\nfixtures = [\"s1\", \"s2\"]\n\
         warmup = 0\nidle_s = 0\ntemperature_fallback = false\n{}{}{}{LENIENT_ADMISSION}",
        external_arm(
            "encoder-only",
            "tiny.en",
            &format!(
                "fixtures = [\"s1\", \"s2\"]\nexternal_encoder = {{ model = \"{enc}\", model_layout = \"encoder_only\" }}"
            ),
        )
        .replace("fixtures = [\"s1\"]\n", ""),
        // Told encoder-only, given the full model (decoder tensors included).
        external_arm(
            "full-as-encoder-only",
            "tiny.en",
            "external_encoder = { model = \"tiny.en\", model_layout = \"encoder_only\" }",
        ),
        // Told full, given the encoder-only artifact.
        external_arm(
            "encoder-only-as-full",
            "tiny.en",
            &format!("external_encoder = {{ model = \"{enc}\" }}"),
        ),
    );
    let r = run_protocol_body("run", &body, &["--json"]);
    let receipt = receipt(&r.dir);
    let arm = |id: &str| receipt.arms.iter().find(|a| a.id == id).unwrap();
    assert_eq!(arm("stock").status, ArmStatus::Completed);
    assert_eq!(
        arm("encoder-only").status,
        ArmStatus::Completed,
        "{:?}",
        arm("encoder-only").failure
    );
    assert_eq!(tokens(&r.dir, "stock"), tokens(&r.dir, "encoder-only"));

    for (id, why) in [
        (
            "full-as-encoder-only",
            "tensor name is not one this model declares",
        ),
        (
            "encoder-only-as-full",
            "expected tensors are missing: decoder.",
        ),
    ] {
        assert_eq!(arm(id).status, ArmStatus::Failed, "{id}");
        let failure = arm(id).failure.join("; ");
        assert!(
            failure.contains("rejected before loading"),
            "{id}: {failure}"
        );
        assert!(failure.contains(why), "{id}: no `{why}` in {failure}");
    }

    // The process loaded the encoder-only artifact and logged a state for the
    // encoder alone: its pad cache and two graphs, no decoder cache or buffer.
    let runtime = arm("encoder-only")
        .speech
        .as_ref()
        .unwrap()
        .runtime
        .clone()
        .unwrap();
    let process = runtime.external_encoder.unwrap();
    assert_eq!(process.layout, worker_contract::ModelLayout::EncoderOnly);
    let state = &process.topology.unwrap().states[0];
    assert!(
        state.kv_self.is_none() && state.kv_cross.is_none(),
        "{state:?}"
    );
    assert!(state.kv_pad.is_some(), "{state:?}");
    let graphs: Vec<&str> = state.compute.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(graphs, ["conv", "encode"]);
    // Nor does the worker keep a pad cache or a conv graph (patch 0005): they
    // serve the native encoder only. Its one buffer for the encoder output
    // holds 1500 positions of 384 floats (logged in MB to 2 decimals).
    assert!(runtime.topology.states[0].kv_pad.is_none());
    let worker_graphs: Vec<(&str, u64)> = runtime.topology.states[0]
        .compute
        .iter()
        .map(|(g, s)| (g.as_str(), s.bytes))
        .collect();
    assert_eq!(
        worker_graphs.iter().map(|(g, _)| *g).collect::<Vec<_>>(),
        ["encoder output", "cross", "decode"]
    );
    assert!(
        worker_graphs[0].1.abs_diff(1500 * 384 * 4) <= 5_000,
        "{worker_graphs:?}"
    );

    // Its own footprint grew by the encoder's weights on loading (margin
    // 10 %: the context and mel filters; 17.6 MB of weights measured 17.6).
    let weights = estimate(&encoder, &[])["native_encoder_weight_bytes"]
        .as_u64()
        .unwrap();
    let grew = encoder_step(&receipt, "encoder-only", "model_loaded", "footprint_bytes")
        - encoder_step(&receipt, "encoder-only", "process_start", "footprint_bytes");
    let ratio = grew as f64 / weights as f64;
    assert!(
        (0.95..=1.10).contains(&ratio),
        "grew {grew} for {weights} bytes of weights"
    );

    // Its runtime_ready step comes before any weight and after ggml's CPU
    // backend filled its fp16 and GELU tables (512 KiB of static arrays).
    let start = encoder_step(&receipt, "encoder-only", "process_start", "footprint_bytes");
    let baseline = encoder_step(&receipt, "encoder-only", "runtime_ready", "footprint_bytes");
    assert!(
        baseline >= start + 256 * 1024 && baseline + 4 * 1024 * 1024 < start + weights,
        "process_start {start}, runtime_ready {baseline}"
    );

    // The pair against stock plus the encoder process's baseline. Margin
    // 0.5 MiB: the heap bookkeeping of a second whisper.cpp context (measured
    // 0.16-0.18 MiB at the Turbo shape); the full model's process holds 80 MiB more.
    for (phase, step) in [
        (sampler::Phase::ModelLoaded, "model_loaded"),
        (sampler::Phase::StateReady, "state_ready"),
    ] {
        let pair = marker_footprint(&r.dir, "encoder-only", phase)
            + encoder_step(&receipt, "encoder-only", step, "footprint_bytes");
        let stock = marker_footprint(&r.dir, "stock", phase);
        assert!(
            pair as f64 <= (stock + baseline) as f64 + 0.5 * MIB,
            "{step}: worker + encoder process {:.2} MiB, stock {:.2} + baseline {:.2} MiB",
            pair as f64 / MIB,
            stock as f64 / MIB,
            baseline as f64 / MIB
        );
    }
}

/// `protocols/turbo-shape-ladder.toml` through the same code at base's shape
/// (the Turbo shape itself takes 15 minutes: a protocol, not a test): the
/// artifacts its header says how to make, every stage completed, exact
/// parity where the protocol claims it, the pair within stock plus the
/// encoder process's baseline, and the bounded state's saving as predicted.
#[test]
fn the_turbo_shape_ladder_runs_at_base_shape() {
    patched_worker();
    let models = tempfile::tempdir().unwrap();
    let at = |name: &str| models.path().join(format!("ggml-base-shape-{name}.bin"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    for args in [
        vec![
            "fixtures".into(),
            "synthetic".into(),
            path(&at("f16")),
            "--preset".into(),
            "base".into(),
        ],
        vec![
            "artifact".into(),
            "quantize".into(),
            "--type".into(),
            "q5_0".into(),
            path(&at("f16")),
            path(&at("q5_0")),
        ],
        vec![
            "artifact".into(),
            "derive-decoder".into(),
            path(&at("f16")),
            path(&at("decoder-f16")),
        ],
        vec![
            "artifact".into(),
            "quantize".into(),
            "--decoder-only".into(),
            "--type".into(),
            "q5_0".into(),
            path(&at("decoder-f16")),
            path(&at("decoder-q5_0")),
        ],
        vec![
            "artifact".into(),
            "derive".into(),
            "--encoder-only".into(),
            path(&at("f16")),
            path(&at("encoder-f16")),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = memqual(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let protocol =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocols/turbo-shape-ladder.toml");
    // Its tables as written (the test header names the protocol), quiet-host
    // admission relaxed for a busy test machine.
    let text = std::fs::read_to_string(protocol).unwrap();
    let tables = &text[text.find("\n[params]").expect("a [params] table")..];
    let body = format!("{tables}{LENIENT_ADMISSION}");
    let models_param = format!("models={}", models.path().display());
    let r = run_protocol_body(
        "run",
        &body,
        &[
            "--param",
            &models_param,
            "--param",
            "shape=base-shape",
            "--json",
        ],
    );
    assert!(r.dir.join("receipt.json").is_file(), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let arm = |id: &str| receipt.arms.iter().find(|a| a.id == id).unwrap();
    for a in &receipt.arms {
        assert_eq!(a.status, ArmStatus::Completed, "{}: {:?}", a.id, a.failure);
    }
    assert_eq!(receipt.arms.len(), 5, "{}", stderr(&r.out));
    let gates = receipt.gates.as_ref().expect("the protocol declares gates");
    let outcome = |arm: &str, check: &str| {
        gates
            .arms
            .iter()
            .find(|a| a.arm == arm)
            .unwrap()
            .gates
            .iter()
            .flat_map(|g| &g.checks)
            .find(|c| c.name.contains(check))
            .unwrap_or_else(|| panic!("{arm}: no check `{check}`"))
            .clone()
    };
    use reports::gates::Outcome;
    for (a, check) in [
        (
            "stage2-encoder-process",
            "model_loaded footprint_bytes with the encoder process",
        ),
        (
            "stage2-encoder-process",
            "state_ready footprint_bytes with the encoder process",
        ),
        (
            "stage4-bounded-state",
            "state_ready footprint_bytes with the encoder process",
        ),
    ] {
        let c = outcome(a, check);
        assert_eq!(c.outcome, Outcome::Pass, "{a}: {c:?}");
    }
    // Exact tokens: the encoder process against stock, the bound against the unbounded arm.
    assert_eq!(
        tokens(&r.dir, "stage0"),
        tokens(&r.dir, "stage2-encoder-process")
    );
    assert_eq!(
        tokens(&r.dir, "stage3-decoder-q5_0"),
        tokens(&r.dir, "stage4-bounded-state")
    );
    // The steered model says one word and ends.
    assert!(
        tokens(&r.dir, "stage0").iter().all(|(_, t)| t.len() <= 4),
        "{:?}",
        tokens(&r.dir, "stage0")
    );

    // Stage 4's saving, worker and encoder process, as the estimate predicts
    // (resident: the worker's cross cache and the process's pad cache, both
    // for 768 instead of 1536 positions), within 5 %.
    let saving = arm("stage4-bounded-state")
        .state_accounting
        .as_ref()
        .and_then(|s| s.against_control.clone())
        .expect("a saving against stage 3");
    let base = estimate(&at("f16"), &[]);
    let bounded = estimate(&at("f16"), &["--audio-ctx", "768", "--max-batch", "8"]);
    let key = |e: &serde_json::Value, k: &str| e[k].as_u64().unwrap() as i64;
    let predicted = key(&base, "kv_cross_bytes") - key(&bounded, "kv_cross_bytes")
        + key(&base, "kv_pad_bytes")
        - key(&bounded, "kv_pad_bytes");
    assert_eq!(saving.predicted_resident_bytes, predicted);
    let x = saving.resident_mismatch.unwrap();
    assert!(
        x.abs() <= 0.05,
        "measured {} against {predicted} predicted",
        saving.measured_resident_bytes
    );
}

/// Layouts in the wrong place are refused at load, naming the key, before
/// any worker starts: an encoder-only artifact for the decoding worker, a
/// decoder-only one for the encoder process, and `encoder_only` without
/// naming the artifact.
#[test]
fn an_encoder_only_layout_in_the_wrong_place_is_refused_naming_the_key() {
    for (extra, key, why) in [
        (
            "model_layout = \"encoder_only\"\nexternal_encoder = {}",
            "model_layout",
            "an encoder-only artifact cannot decode",
        ),
        (
            "external_encoder = { model = \"tiny.en\", model_layout = \"decoder_only\" }",
            "external_encoder.model_layout",
            "never `decoder_only`",
        ),
        (
            "external_encoder = { model_layout = \"encoder_only\" }",
            "external_encoder.model",
            "memqual artifact derive --encoder-only",
        ),
    ] {
        let r = run_protocol_body("run", &external_arm("a", "tiny.en", extra), &[]);
        let err = stderr(&r.out);
        assert_eq!(r.out.status.code(), Some(2), "{extra}: {err}");
        // The location is the key's (file:line:col), the text says why.
        // (line 13: the first line after external_arm's own keys).
        assert!(
            err.contains("protocol.toml:13:") && err.contains(why),
            "{key}: {err}"
        );
        assert!(!r.dir.exists(), "{extra}: nothing may be created");
    }
}
