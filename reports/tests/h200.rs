//! The device-memory analysis on real runs from an NVIDIA H200
//! (`tests/runs/h200/`, made by the memqual binaries copied there: see
//! `tests/runs/README.md`): the receipt, the GPU calibration checks and the
//! device-leak soak are rebuilt here from the raw files alone.

use reports::calibration::check_arm;
use reports::growth::Classification;
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
