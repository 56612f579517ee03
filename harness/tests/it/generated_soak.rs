//! `memqual fixtures soak-run`: a generated night, reported as a real soak
//! is, keeps its receipt bounded (the phase rows beyond what a reviewer
//! needs go to a sealed sidecar), draws its long series from an envelope
//! that keeps the planted spike, and `verify` refuses an edited sidecar.

use crate::common::{memqual, receipt, stderr};

/// A generated hour at 50 ms with a request every 5 s: 72,000 rows (an
/// envelope) and 720 requests (more rows than the receipt keeps).
fn generated_hour(dir: &std::path::Path) -> (u64, u64, u64) {
    let out = memqual(&[
        "fixtures",
        "soak-run",
        dir.to_str().unwrap(),
        "--duration",
        "1h",
        "--request-every",
        "5s",
        "--spike-at",
        "20m",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    // "... spike at tick T (B bytes resident)"
    let number_after = |key: &str| -> u64 {
        let rest = &line[line.find(key).unwrap_or_else(|| panic!("{line}")) + key.len()..];
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        number_after("GENERATED soak,"),
        number_after("spike at tick"),
        number_after("("),
    )
}

#[test]
fn a_generated_night_keeps_its_receipt_bounded_and_its_spike_drawn() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("night");
    let (rows, spike_tick, spike_bytes) = generated_hour(&dir);
    // 20 minutes after the first request (0.56 s in) at 50 ms.
    assert_eq!(spike_tick, (560_000_000 + 1_200_000_000_000) / 50_000_000);
    let r = receipt(&dir);
    let arm = &r.arms[0];
    assert_eq!(arm.requests, 720);
    assert_eq!(arm.series.samples, rows);
    assert!((71_000..72_100).contains(&rows), "{rows} rows");
    // The series maximum is the planted one-tick spike, exactly.
    assert_eq!(arm.series.max_resident_bytes, Some(spike_bytes));
    // Lateness percentiles past 65,536 rows come from the bounded histogram.
    assert!(arm.series.percentiles_relative_error.is_some());
    // Every marker's row is in the sidecar; the receipt keeps far fewer.
    let file = arm
        .phase_rows
        .as_ref()
        .expect("a long arm's rows go to a file");
    assert_eq!(file.path, "arms/generated/phase-rows.jsonl");
    assert_eq!(file.rows, 4 + 2 * 720 + 2);
    assert_eq!(file.kept, arm.phases.len() as u64);
    assert!(file.kept < 300, "{} rows kept", file.kept);
    let lines = std::fs::read_to_string(dir.join(&file.path)).unwrap();
    assert_eq!(lines.lines().count() as u64, file.rows);
    // The page says where it reduced the series and shows the exact maximum.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let note = format!("Reduced for drawing: the {rows} rows");
    assert!(html.contains(&note), "no reduction note");
    let mib = format!("{:.1} MiB resident", spike_bytes as f64 / 1048576.0);
    assert!(
        html.contains(&mib),
        "the page does not give the maximum {mib}"
    );
    let verify = memqual(&["verify", dir.to_str().unwrap()]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn an_edited_phase_rows_sidecar_fails_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("night");
    generated_hour(&dir);
    let sidecar = dir.join("arms/generated/phase-rows.jsonl");
    let text = std::fs::read_to_string(&sidecar).unwrap();
    // One digit of one row's resident bytes changed: same length.
    let at = text.find("\"resident_bytes\":").unwrap() + "\"resident_bytes\":".len();
    let mut bytes = text.into_bytes();
    bytes[at] = if bytes[at] == b'9' {
        b'8'
    } else {
        bytes[at] + 1
    };
    std::fs::write(&sidecar, &bytes).unwrap();
    let verify = memqual(&["verify", dir.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        stderr(&verify)
    );
    assert!(
        said.contains("arms/generated/phase-rows.jsonl") && said.contains("phase_rows"),
        "verify does not name the sidecar against the receipt: {said}"
    );
}
