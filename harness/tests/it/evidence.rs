//! Issue 59: the newer commands held to the old ones' standard. A failed
//! reseal or a deleted seal never rewrites evidence, merge never hides a
//! run, and no typo or deep tree gets a silent answer. Each test runs the
//! real `memqual` binary on a real calibration run.

use crate::common::*;
use std::path::Path;
use std::process::Output;

/// One calibration arm holding a 16 MiB plateau, one short request.
const PLATEAU: &str = "\n[[arm]]\nid = \"plateau\"\n[arm.calibrate]\nrequests = 1\n\
request_ms = 1\nidle_ms = 1\nplateau = { mib = 16 }\n";

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A sealed PASS run of the plateau (`run1` of the issue).
fn sealed_run() -> ProtocolRun {
    let r = run_protocol_body("run", PLATEAU, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    r
}

fn verify(dir: &Path) -> Output {
    memqual(&["verify", path(dir)])
}

/// Finding 1: `report --reseal` over a series that no longer parses exits
/// 2 and must leave `raw-seal.json` byte for byte as it was, so that
/// restoring the raw file restores the seal.
#[test]
fn a_failed_reseal_leaves_the_seal_as_it_was() {
    let r = sealed_run();
    let seal_path = r.dir.join("raw-seal.json");
    let series = r.dir.join("arms/plateau/series.csv");
    let seal_before = std::fs::read(&seal_path).unwrap();
    let series_before = std::fs::read(&series).unwrap();
    let mut edited = series_before.clone();
    edited.extend_from_slice(b"x\n");
    std::fs::write(&series, &edited).unwrap();

    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("series.csv"), "{said}");
    assert!(
        said.contains("raw-seal.json was left as it was: nothing was resealed"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&seal_path).unwrap(),
        seal_before,
        "a failed reseal rewrote raw-seal.json"
    );
    let seal: serde_json::Value = serde_json::from_slice(&seal_before).unwrap();
    assert_eq!(seal["reseals"].as_array().map(Vec::len), Some(0));

    // The edit is still refused, and undoing it brings the seal back.
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("CHANGED arms/plateau/series.csv"),
        "{}",
        text(&out)
    );
    std::fs::write(&series, &series_before).unwrap();
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("seal verified"), "{}", text(&out));
}
