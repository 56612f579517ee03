//! The device-memory analysis on real runs from an NVIDIA H200
//! (`tests/runs/h200/`, made by the memqual binaries copied there: see
//! `tests/runs/README.md`): the receipt, the GPU calibration checks and the
//! device-leak soak are rebuilt here from the raw files alone.

use analysis::growth::Classification;
use reports::calibration::check_arm;
use reports::verdict::Outcome;
use run_dir::{Access, RunDir};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn receipt(name: &str) -> reports::Receipt {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/runs/h200")
        .join(name);
    let run = RunDir::open(&path, Access::Read).expect("the committed run opens");
    reports::assemble(&run).expect("the receipt assembles from the raw files")
}

#[test]
fn the_gpu_calibration_passes_within_five_percent_on_the_h200() {
    let r = receipt("gpu-cal");
    assert_eq!(r.arms.len(), 3);
    let checks: Vec<_> = r.arms.iter().flat_map(check_arm).collect();
    assert_eq!(checks.len(), 9);
    for c in &checks {
        assert!(
            c.pass,
            "{} {} {}: {:?}",
            c.arm, c.pattern, c.quantity, c.measured
        );
    }
    // NVML reports whole allocations: the measured values are the sizes.
    let measured = |pattern: &str, quantity: &str| {
        checks
            .iter()
            .find(|c| c.pattern == pattern && c.quantity.starts_with(quantity))
            .and_then(|c| c.measured)
            .unwrap()
    };
    assert_eq!(measured("gpu_plateau", "device growth"), 4096.0);
    assert_eq!(measured("gpu_plateau", "series"), 4096.0);
    assert!((measured("gpu_leak", "slope of device") - 64.0).abs() < 1e-9);
    assert!((measured("gpu_leak", "slope of the series") - 64.0).abs() < 1e-9);
    assert_eq!(measured("gpu_spike", "series"), 2048.0);
    for a in &r.arms {
        let said = a.series.accelerator.as_deref().unwrap();
        assert_eq!(
            said,
            "NVML (driver 580.159.04): 1 device(s): 0 NVIDIA H200 (143771 MiB)"
        );
        let d = a.series.device.as_ref().unwrap();
        assert_eq!(d.total_bytes, Some(143_771 * MIB));
        assert_eq!(d.rows_unread, 0);
    }
    // The plateau arm: context plus 4 GiB at its peak, the device's own
    // used a little above (the driver's reservation).
    let plateau = &r.arms[0].series.device.as_ref().unwrap();
    assert_eq!(plateau.max_worker_bytes, Some(4_838_129_664));
    assert!(plateau.max_used_bytes.unwrap() > plateau.max_worker_bytes.unwrap());
}

#[test]
fn the_device_leak_soak_is_linear_growth_on_device_with_resident_flat() {
    let r = receipt("gpu-soak");
    let arm = &r.arms[0];
    let s = arm.stability.as_ref().expect("a soaked arm");
    assert_eq!(s.requests, 200);
    assert_eq!(s.worker, Classification::Plateau);
    for g in &s.worker_series {
        assert_eq!(g.classification, Classification::Plateau, "{}", g.series);
    }
    let device: Vec<(&str, Classification, f64)> = s
        .device_series
        .iter()
        .map(|g| {
            (
                g.series.as_str(),
                g.classification,
                g.bytes_per_request.unwrap().estimate,
            )
        })
        .collect();
    assert_eq!(
        device,
        [
            (
                "gpu_worker",
                Classification::LinearGrowth,
                (16 * MIB) as f64
            ),
            ("gpu_used", Classification::LinearGrowth, (16 * MIB) as f64),
        ]
    );
    assert_eq!(
        s.device_growth_while_resident_flat,
        ["gpu_worker", "gpu_used"]
    );
    assert_eq!(s.stable, Some(false));

    // The stability gate fails, and its note names the pattern.
    let gates = reports::gates::evaluate(&r).expect("the arm declares a gate");
    let verdict = &gates.arms[0];
    assert_eq!(verdict.verdict, Outcome::Fail);
    let stability = verdict
        .gates
        .iter()
        .find(|g| g.kind == "stability")
        .unwrap();
    let soak = stability
        .checks
        .iter()
        .find(|c| c.name == "soak verdict")
        .unwrap();
    assert_eq!(soak.outcome, Outcome::Fail);
    assert!(
        soak.note
            .contains("device memory grows while resident is flat: gpu_worker, gpu_used"),
        "{}",
        soak.note
    );
    let worker_device = stability
        .checks
        .iter()
        .find(|c| {
            c.note
                .contains("device (GPU) memory grows while the worker's resident memory is flat")
        })
        .expect("a device series check names the pattern");
    assert_eq!(worker_device.outcome, Outcome::Fail);
}

/// A committed run kept as a zip archive (`tests/runs/h200/NAME.zip`, the
/// raw files of one run directory, about a tenth of their size), unpacked
/// into a temporary folder and assembled from there.
fn zipped_receipt(name: &str) -> (reports::Receipt, tempfile::TempDir) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/runs/h200")
        .join(format!("{name}.zip"));
    let file = std::fs::File::open(&path).expect("the committed archive opens");
    let mut archive = zip::ZipArchive::new(file).expect("a zip archive");
    let dir = tempfile::tempdir().unwrap();
    archive.extract(dir.path()).expect("the archive unpacks");
    let run = RunDir::open(&dir.path().join(name), Access::Read).expect("the run opens");
    let receipt = reports::assemble(&run).expect("the receipt assembles from the raw files");
    (receipt, dir)
}

fn arm<'a>(r: &'a reports::Receipt, id: &str) -> &'a reports::receipt::ArmReceipt {
    r.arms.iter().find(|a| a.id == id).unwrap()
}

/// The CUDA stages whose device memory the tests compare.
const LADDER: [&str; 5] = [
    "stage0-cuda",
    "stage1-q5_0-cuda",
    "stage2-cuda",
    "stage4-ctx-cuda",
    "stage4-cuda",
];

/// What loading the model and creating the state added on the device, MiB.
fn device_split_mib(r: &reports::Receipt, id: &str) -> (i64, i64) {
    let d = arm(r, id).device_memory.as_ref().unwrap();
    let mib = |bytes: i64| bytes / MIB as i64;
    (
        mib(d.model.unwrap().device_bytes),
        mib(d.state.unwrap().device_bytes),
    )
}

fn verdicts(r: &reports::Receipt) -> Vec<(String, Outcome)> {
    let gates = reports::gates::evaluate(r).expect("gates declared");
    gates
        .arms
        .iter()
        .map(|a| (a.arm.clone(), a.verdict))
        .collect()
}

fn identical_fixtures(r: &reports::Receipt, arm: &str) -> (usize, usize) {
    let c = r.comparisons.iter().find(|c| c.arm == arm).unwrap();
    let Ok(parity) = c.parity.as_ref() else {
        panic!("{arm}: parity was not compared")
    };
    (
        parity.fixtures_compared - parity.mismatches.len(),
        parity.fixtures_compared,
    )
}

#[test]
fn the_cuda_ladder_on_tiny_en_puts_the_weights_on_the_device() {
    let (r, _dir) = zipped_receipt("gpu-ladder-tiny.en");
    assert_eq!(r.arms.len(), 7);
    // The CPU reference reads no device memory: no accounting, never zeros.
    assert!(arm(&r, "cpu-f16").device_memory.is_none());
    let stage0 = arm(&r, "stage0-cuda").device_memory.as_ref().unwrap();
    // The CUDA context before the model: 518 MiB on the device, as under
    // the calibration worker, and about 100 MiB more resident than the CPU
    // worker's process_start (the driver and the CUDA runtime).
    assert_eq!(stage0.baseline.device_bytes, 518 * MIB);
    let cpu_start = arm(&r, "cpu-f16").phases[0].memory.resident_bytes;
    let cuda_host = stage0.baseline.resident_bytes - cpu_start;
    assert!((90 * MIB..115 * MIB).contains(&cuda_host), "{cuda_host}");
    // tiny.en's F16 weights (74 MiB of tensors) went to the device.
    let model = stage0.model.unwrap();
    assert_eq!(model.device_bytes, 74 * MIB as i64);
    assert!(model.host_bytes < model.device_bytes / 2, "{model:?}");
    // Q5_0 keeps 28 MiB of them; external-encoder-only loading leaves the
    // encoder's 16 MiB off the device, and its compute buffers with them;
    // the bounded state takes 18 MiB there against 114 at stock size.
    assert_eq!(
        LADDER.map(|id| device_split_mib(&r, id)),
        [(74, 188), (28, 188), (58, 114), (58, 114), (58, 18)]
    );
    // CUDA's kernels against the CPU's: one fixture of 18 differs.
    assert_eq!(identical_fixtures(&r, "stage0-cuda"), (17, 18));
    assert_eq!(identical_fixtures(&r, "stage0-patched-cuda"), (18, 18));
    assert_eq!(identical_fixtures(&r, "stage4-cuda"), (18, 18));
    assert_eq!(
        verdicts(&r),
        [
            ("stage0-cuda".to_string(), Outcome::Pass),
            ("stage0-patched-cuda".to_string(), Outcome::Pass),
            // Q5_0's WER on `numbers` is more than 5 points worse.
            ("stage1-q5_0-cuda".to_string(), Outcome::Fail),
            ("stage2-cuda".to_string(), Outcome::Pass),
            // audio_ctx = 768 costs `names` more than 5 points.
            ("stage4-ctx-cuda".to_string(), Outcome::Fail),
            ("stage4-cuda".to_string(), Outcome::Pass),
        ]
    );
}

#[test]
fn the_cuda_ladder_on_base_matches_the_cpu_and_a_skipped_tick_fails_validity() {
    let (r, _dir) = zipped_receipt("gpu-ladder-base");
    let baseline = arm(&r, "stage0-cuda")
        .device_memory
        .as_ref()
        .unwrap()
        .baseline
        .device_bytes;
    assert_eq!(baseline, 518 * MIB);
    assert_eq!(
        LADDER.map(|id| device_split_mib(&r, id)),
        [(142, 224), (54, 224), (100, 126), (100, 126), (100, 24)]
    );
    // On base the CUDA transcripts equal the CPU's, the CPU encoder's too.
    assert_eq!(identical_fixtures(&r, "stage0-cuda"), (18, 18));
    assert_eq!(identical_fixtures(&r, "stage2-cuda"), (18, 18));
    let v = verdicts(&r);
    // The external sampler skipped one tick of 99 in stage 0: its
    // validity gate fails, and the arm with it.
    assert_eq!(v[0], ("stage0-cuda".to_string(), Outcome::Fail));
    let gates = reports::gates::evaluate(&r).unwrap();
    let validity = gates.arms[0]
        .gates
        .iter()
        .find(|g| g.kind == "validity")
        .unwrap();
    assert_eq!(validity.outcome, Outcome::Fail);
    assert!(
        validity
            .checks
            .iter()
            .any(|c| c.outcome == Outcome::Fail && c.note.contains("1 of 99 ticks skipped")),
        "{validity:?}"
    );
    assert_eq!(v[2], ("stage1-q5_0-cuda".to_string(), Outcome::Pass));
    assert_eq!(v[5], ("stage4-cuda".to_string(), Outcome::Pass));
}

#[test]
fn seed_001s_long_form_soak_on_cuda_holds_device_memory_on_a_plateau() {
    let (r, _dir) = zipped_receipt("gpu-soak-long-form");
    let a = &r.arms[0];
    let s = a.stability.as_ref().expect("a soaked arm");
    assert_eq!(s.requests, 60);
    // The device: flat from the first measured pass, to the byte.
    for g in &s.device_series {
        assert_eq!(g.classification, Classification::Plateau, "{}", g.series);
        assert_eq!(g.bytes_per_request.as_ref().unwrap().estimate, 0.0);
    }
    assert!(s.device_growth_while_resident_flat.is_empty());
    // The host side is what is undecided: the worker's resident memory
    // still rises by about 450 KiB a pass, its tail interval straddling the
    // 64 KiB threshold.
    assert_eq!(s.worker, Classification::Inconclusive);
    let resident = s
        .worker_series
        .iter()
        .find(|g| g.series == "worker_resident")
        .unwrap();
    let slope = resident.bytes_per_request.as_ref().unwrap();
    assert!((400e3..500e3).contains(&slope.estimate), "{slope:?}");
    let device = a.device_memory.as_ref().unwrap();
    assert_eq!(device.baseline.device_bytes, 518 * MIB);
}
