//! memqual in CI, on the real binary: `--junit` (validated against the JUnit
//! XSD with xmllint), `--export-bmf` (validated against a BMF JSON Schema),
//! `GITHUB_STEP_SUMMARY`, `compare --json --max-regression`, `version
//! --verbose`, `run --shard` and `merge` over three real runs, `run`'s
//! progress, completions and the man page.

use crate::common::*;
use fleet::fleet::FleetReport;
use quick_junit::{Report, TestCaseStatus};
use reports::Receipt;
use reports::gates::Outcome;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A control and two gated candidates (the promoted one holds 40 MiB against
/// the control's 8 and fails its memory gate), an arm that crashes, and one
/// whose control is that crashing arm (its memory check cannot be made:
/// NOT_EVALUATED).
const MATRIX: &str = r#"
[[arm]]
id = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 8 }

[[arm]]
id = "bigger"
control = "base"
promote = true
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 40 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5

[[arm]]
id = "same"
control = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 8 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5

[[arm]]
id = "crashes"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
crash_at = 0

[[arm]]
id = "orphan"
control = "crashes"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5
"#;

/// Three arms: a control and two candidates, for fleets.
const FLEET: &str = r#"
[[arm]]
id = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 8 }

[[arm]]
id = "bigger"
control = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 40 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5

[[arm]]
id = "same"
control = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 8 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5
"#;

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `memqual ARGS` with the test workers, and `env` set (a `None` value removes the variable).
fn memqual_env(args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut cmd = Command::new(MEMQUAL);
    cmd.args(args)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("MEMQUAL_HOST_LABEL");
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().expect("memqual runs")
}

/// Write `body` (with lenient admission) as a protocol in `dir` and run it
/// into `dir/<name>` with `extra` arguments.
fn run_into(
    dir: &Path,
    name: &str,
    body: &str,
    extra: &[&str],
    env: &[(&str, Option<&str>)],
) -> (PathBuf, Output) {
    let protocol = dir.join("protocol.toml");
    if !protocol.exists() {
        write_protocol(dir, &format!("{body}{LENIENT_ADMISSION}"));
    }
    let out_dir = dir.join(name);
    let mut args = vec!["run", path(&protocol), "--out", path(&out_dir)];
    args.extend(extra);
    let out = memqual_env(&args, env);
    (out_dir, out)
}

/// The JUnit files of a gated run, a calibration and a soak, each against
/// the Jenkins xUnit XSD with xmllint (the tests above read them with
/// quick-junit, which does not validate).
#[test]
#[ignore = "needs xmllint (Debian package libxml2-utils): JUnit against its XSD"]
fn junit_of_run_calibrate_and_soak_is_valid_against_the_xsd() {
    let xmllint = system_tool("xmllint", "libxml2-utils");
    let tmp = tempfile::tempdir().unwrap();
    let files = [
        gated_run_with_ci_files(tmp.path()).junit,
        calibration_with_ci_files(tmp.path()).junit,
        soak_with_ci_files(tmp.path()).junit,
    ];
    let schema = schemas().join("jenkins-xunit-junit-10.xsd");
    for file in &files {
        let out = Command::new(&xmllint)
            .args(["--noout", "--schema", path(&schema), path(file)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {}", file.display(), text(&out));
    }
}

/// What a command wrote for CI beside its run directory.
struct CiFiles {
    dir: PathBuf,
    out: Output,
    junit: PathBuf,
    bmf: PathBuf,
}

/// `calibrate` on one 32 MiB plateau with `--json`, `--junit` and `--export-bmf`.
fn calibration_with_ci_files(tmp: &Path) -> CiFiles {
    let protocol = write_protocol(
        tmp,
        &format!(
            "[[arm]]\nid = \"plateau-32\"\n[arm.calibrate]\nrequests = 2\nplateau = {{ mib = 32 }}\n{LENIENT_ADMISSION}"
        ),
    );
    let dir = tmp.join("cal");
    let args = [
        "calibrate",
        "--protocol",
        path(&protocol),
        "--out",
        path(&dir),
    ];
    with_ci_files(&[&args[..], &["--json"]].concat(), dir.clone(), tmp, "cal")
}

/// `memqual ARGS --junit <at>/<name>.xml --export-bmf <at>/<name>.json`,
/// whose run directory is `dir`.
fn with_ci_files(args: &[&str], dir: PathBuf, at: &Path, name: &str) -> CiFiles {
    let (junit, bmf) = (
        at.join(format!("{name}.xml")),
        at.join(format!("{name}.json")),
    );
    let ci = ["--junit", path(&junit), "--export-bmf", path(&bmf)];
    let out = memqual(&[args, &ci[..]].concat());
    CiFiles {
        dir,
        out,
        junit,
        bmf,
    }
}

/// A 40-request calibration soak with `--junit` and `--export-bmf`.
fn soak_with_ci_files(tmp: &Path) -> CiFiles {
    let soak = tmp.join("soak");
    std::fs::create_dir_all(&soak).unwrap();
    let protocol = write_protocol(
        &soak,
        &format!(
            "[[arm]]\nid = \"cal\"\n[arm.calibrate]\nwarmup = 0\nidle_ms = 0\nrequest_ms = 1\n\
             [soak]\nwarmup_requests = 0\nmin_points = 5\nbootstrap_resamples = 20\n{LENIENT_ADMISSION}"
        ),
    );
    let dir = soak.join("run");
    let args = [
        "soak",
        path(&protocol),
        "--requests",
        "40",
        "--no-history",
        "--out",
        path(&dir),
    ];
    with_ci_files(&args, dir.clone(), &soak, "soak")
}

/// [`MATRIX`] run with `--junit`, `--export-bmf` and a step summary
/// (`<tmp>/step-summary.md`, which held an earlier step's text).
fn gated_run_with_ci_files(tmp: &Path) -> CiFiles {
    let (junit, bmf, summary) = (
        tmp.join("out/junit.xml"),
        tmp.join("out/metrics.json"),
        tmp.join("step-summary.md"),
    );
    std::fs::create_dir_all(tmp.join("out")).unwrap();
    std::fs::write(&summary, "# earlier step\n").unwrap();
    let (dir, out) = run_into(
        tmp,
        "run",
        MATRIX,
        &["--junit", path(&junit), "--export-bmf", path(&bmf)],
        &[
            ("GITHUB_STEP_SUMMARY", Some(path(&summary))),
            ("NO_COLOR", Some("1")),
        ],
    );
    CiFiles {
        dir,
        out,
        junit,
        bmf,
    }
}

fn schemas() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemas")
}

fn status_name(s: &TestCaseStatus) -> &'static str {
    match s {
        TestCaseStatus::Success { .. } => "success",
        TestCaseStatus::NonSuccess { .. } => "failure",
        TestCaseStatus::Skipped { .. } => "skipped",
    }
}

#[test]
fn junit_bmf_and_the_step_summary_of_a_gated_run() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("step-summary.md");
    let CiFiles {
        dir,
        out,
        junit,
        bmf,
    } = gated_run_with_ci_files(tmp.path());
    // The promoted arm fails its memory gate: exit 1, and the files are written anyway.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let receipt = receipt(&dir);
    let gates = receipt.gates.as_ref().unwrap();

    // JUnit: one case per gate check, outcomes mapped (the XSD: above).
    let xml = std::fs::read_to_string(&junit).unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    let mut expected = Vec::new();
    for a in &gates.arms {
        for g in &a.gates {
            for c in &g.checks {
                let status = match c.outcome {
                    Outcome::Pass => "success",
                    Outcome::Fail => "failure",
                    Outcome::NotEvaluated => "skipped",
                };
                expected.push((
                    format!("test.{}", a.arm),
                    format!("{}: {}", g.kind, c.name),
                    status,
                ));
            }
        }
    }
    let mut found = Vec::new();
    for s in &report.test_suites {
        for c in &s.test_cases {
            found.push((
                s.name.as_str().to_string(),
                c.name.as_str().to_string(),
                status_name(&c.status),
            ));
        }
    }
    assert_eq!(found, expected);
    assert!(
        found.contains(&(
            "test.bigger".into(),
            "memory: state_ready resident_bytes".into(),
            "failure"
        )),
        "{found:#?}"
    );
    // The control crashed: the memory check could not be made.
    assert!(
        found
            .iter()
            .any(|(s, n, st)| s == "test.orphan" && n.starts_with("memory: ") && *st == "skipped"),
        "{found:#?}"
    );
    // Validity checks depend on how busy this host is: count what the receipt says.
    let failed = gates
        .arms
        .iter()
        .flat_map(|a| &a.gates)
        .flat_map(|g| &g.checks)
        .filter(|c| c.outcome == Outcome::Fail)
        .count();
    assert_eq!(report.failures, failed, "{xml}");

    // BMF: valid against the schema; the numbers are the receipt's.
    let value = valid_bmf(&bmf);
    for a in &receipt.arms {
        let peak = a.state_ready_peak();
        let m = &value[format!("memqual/test/{}", a.id)];
        match peak {
            Some(p) => assert_eq!(m["state-ready-peak-bytes"]["value"], p as f64, "{}", a.id),
            None => assert!(m.get("state-ready-peak-bytes").is_none(), "{}", a.id),
        }
        if let Some(l) = &a.latency {
            assert_eq!(m["latency-p95-ns"]["value"], l.p95_ns, "{}", a.id);
        }
    }
    let bigger = value["memqual/test/bigger"]["state-ready-peak-bytes"]["value"]
        .as_f64()
        .unwrap();
    let base = value["memqual/test/base"]["state-ready-peak-bytes"]["value"]
        .as_f64()
        .unwrap();
    assert!(bigger - base > 31.0 * MIB, "{bigger} vs {base}");

    // The step summary: the earlier step's text, then summary.md.
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        format!("# earlier step\n{md}\n")
    );

    // Progress without a terminal: plain lines, one per phase, no colour.
    let err = stderr(&out);
    for line in [
        "memqual: [2/5] arm bigger: state_ready · 0/2 requests",
        "memqual: [2/5] arm bigger: teardown_done · 2/2 requests",
        "memqual: [4/5] arm crashes: process_start",
    ] {
        assert!(err.contains(line), "{line}\n{err}");
    }
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn ci_files_go_to_regular_files_devices_and_links_never_block_or_replace_a_device() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/dir/junit.xml");
    let (_, out) = run_into(tmp.path(), "run", FLEET, &["--junit", path(&missing)], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stderr(&out).contains("does the folder exist?"),
        "{}",
        text(&out)
    );
    // A FIFO nobody reads: an error at once, not a hang; the FIFO stays.
    let fifo = tmp.path().join("fifo.xml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (_, out) = run_into(tmp.path(), "run2", FLEET, &["--junit", path(&fifo)], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stderr(&out).contains("a FIFO (or socket) that nothing reads"),
        "{}",
        text(&out)
    );
    assert!(!std::fs::metadata(&fifo).unwrap().is_file());
    // A device is written to, never replaced (CI runs as root: /dev/null must survive).
    let (_, out) = run_into(
        tmp.path(),
        "run2b",
        FLEET,
        &["--junit", "/dev/null", "--export-bmf", "/dev/null"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    // Through a link to a regular file: refused before the run (issue 59:
    // memqual never writes through a link); the file and the link are kept.
    let real = tmp.path().join("real.xml");
    std::fs::write(&real, "old").unwrap();
    let link = tmp.path().join("link.xml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (_, out) = run_into(tmp.path(), "run2c", FLEET, &["--junit", path(&link)], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is a symbolic link"), "{}", text(&out));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "old");
    // A FIFO as the step summary is refused without blocking, with a warning.
    let summary_fifo = tmp.path().join("summary-fifo");
    nix::unistd::mkfifo(
        &summary_fifo,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let (_, out) = run_into(
        tmp.path(),
        "run3",
        FLEET,
        &[],
        &[("GITHUB_STEP_SUMMARY", Some(path(&summary_fifo)))],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr(&out).contains("cannot append the summary to GITHUB_STEP_SUMMARY"),
        "{}",
        text(&out)
    );
}

/// Check `bmf` against the BMF schema; returns it.
fn valid_bmf(bmf: &Path) -> serde_json::Value {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schemas().join("bmf.schema.json")).unwrap())
            .unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bmf).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{value:#}");
    value
}

#[test]
fn calibrate_and_soak_write_junit_and_bmf_too() {
    let tmp = tempfile::tempdir().unwrap();
    // calibrate: one suite of calibration checks, as the table prints them.
    let CiFiles {
        out, junit, bmf, ..
    } = calibration_with_ci_files(tmp.path());
    let table: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let suite = report
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "test.calibration")
        .unwrap();
    let checks = table["checks"].as_array().unwrap();
    assert!(!checks.is_empty());
    assert_eq!(suite.test_cases.len(), checks.len());
    for (case, check) in suite.test_cases.iter().zip(checks) {
        let expected = if check["pass"] == true {
            "success"
        } else {
            "failure"
        };
        assert_eq!(status_name(&case.status), expected, "{check}");
    }
    assert_eq!(
        out.status.code(),
        Some(if table["passed"] == true { 0 } else { 1 })
    );
    let value = valid_bmf(&bmf);
    assert!(
        value["memqual/test/plateau-32"]["state-ready-peak-bytes"]["value"]
            .as_f64()
            .unwrap()
            > 32.0 * MIB
    );

    // soak: the growth judgement as test cases, and slopes with their interval.
    let CiFiles {
        dir,
        out,
        junit,
        bmf,
    } = soak_with_ci_files(tmp.path());
    let r = receipt(&dir);
    let stability = r.arms[0].stability.as_ref().unwrap();
    assert_eq!(
        out.status.code(),
        Some(if stability.stable == Some(true) { 0 } else { 1 }),
        "{}",
        text(&out)
    );
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let suite = report
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "test.cal.soak")
        .unwrap();
    let stable_case = &suite.test_cases[0];
    assert_eq!(stable_case.name.as_str(), "stability");
    assert_eq!(
        status_name(&stable_case.status),
        if stability.stable == Some(true) {
            "success"
        } else {
            "failure"
        }
    );
    let judged = stability.worker_series.len()
        + stability.settled_series.len()
        + stability.system_series.len();
    // stability, one case per judged series, and the history check.
    assert_eq!(suite.test_cases.len(), judged + 2);
    let value = valid_bmf(&bmf);
    let m = &value["memqual/test/cal"];
    let g = &stability.worker_series[0];
    let slope = g
        .bytes_per_request
        .as_ref()
        .expect("40 requests give a slope");
    let key = format!(
        "soak-{}-slope-bytes-per-request",
        g.series.replace('_', "-")
    );
    assert_eq!(m[&key]["value"], slope.estimate, "{key}: {m:#}");
    assert_eq!(m[&key]["lower_value"], slope.low);
    assert_eq!(m[&key]["upper_value"], slope.high);
}

fn compare(a: &Path, b: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compare", path(a), path(b)];
    args.extend(extra);
    memqual(&args)
}

#[test]
fn compare_prints_json_and_fails_on_a_regression_beyond_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("small");
    let big = tmp.path().join("big");
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::create_dir_all(&big).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let arm = |id: &str, mib: u32| {
        format!(
            "[[arm]]\nid = \"{id}\"\n[arm.calibrate]\nrequests = 2\nrequest_ms = 20\nidle_ms = 1\nplateau = {{ mib = {mib} }}\n"
        )
    };
    let (a, out) = run_into(&small, "run", &arm("a", 8), &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (b, out) = run_into(&big, "run", &arm("a", 64), &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (c, out) = run_into(&other, "run", &arm("z", 8), &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let out = compare(&a, &b, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (ra, rb) = (receipt(&a), receipt(&b));
    let peak = |r: &Receipt| r.arms[0].state_ready_peak().unwrap() as f64;
    let m = &json["arms"][0]["metrics"][0];
    assert_eq!(json["arms"][0]["arm"], "a");
    assert_eq!(m["metric"], "state_ready_peak_bytes");
    assert_eq!(m["a"], peak(&ra));
    assert_eq!(m["b"], peak(&rb));
    assert_eq!(m["delta"], peak(&rb) - peak(&ra));
    let pct = (peak(&rb) - peak(&ra)) / peak(&ra) * 100.0;
    assert!((m["delta_pct"].as_f64().unwrap() - pct).abs() < 1e-9);
    assert!(pct > 100.0, "56 MiB more on about 13: {pct}");
    assert_eq!(m["regression"], false, "no limit given");
    assert_eq!(json["regressions"], serde_json::json!([]));

    // Beyond 100 %: exit 1, naming the arm and the metrics.
    let out = compare(&a, &b, &["--max-regression", "100"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = stderr(&out);
    assert!(said.contains("a state_ready_peak_bytes"), "{said}");
    assert!(said.contains("a max_resident_bytes"), "{said}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("REGRESSION a state_ready_peak_bytes"),
        "{}",
        text(&out)
    );
    // A run against itself never regresses, even at 0 %.
    let out = compare(&a, &a, &["--max-regression", "0", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // An arm measured in A and missing from B cannot show it did not regress.
    let out = compare(&a, &c, &["--max-regression", "50", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["regressions"][0]["reason"], "measured in A, not in B",
        "{json:#}"
    );
    // The limit is range-checked.
    for bad in ["-1", "NaN", "1e9", "five"] {
        let out = compare(&a, &b, &["--max-regression", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
    }
}

/// A run whose seal is broken (a raw file edited after sealing) is named by
/// `compare`, its figures are marked unverified, and the exit code is 1,
/// whichever side it is on and with or without --json.
#[test]
fn compare_verifies_both_seals_and_marks_a_broken_run_unverified() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 2\nrequest_ms = 5\nidle_ms = 1\n";
    let (a, out) = run_into(tmp.path(), "a", body, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (b, out) = run_into(tmp.path(), "b", body, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // Both seals hold: exit 0, the figures verified and unmarked.
    let out = compare(&a, &b, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["figures_verified"], true, "{json:#}");
    assert_eq!(json["a"]["seal"]["verified"], true, "{json:#}");
    assert_eq!(json["b"]["seal"]["problems"], serde_json::json!([]));
    let measured_in_b = json["arms"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["b"].is_null())
        .count();
    let out = compare(&a, &b, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("UNVERIFIED"), "{}", text(&out));

    // A raw file of B changes after sealing.
    std::fs::write(b.join("arms/a/worker.log"), "edited after the run\n").unwrap();
    let out = compare(&a, &b, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains(&format!(
            "run B ({}): seal BROKEN (1 problems): its figures are UNVERIFIED",
            b.display()
        )),
        "{said}"
    );
    assert!(said.contains("CHANGED arms/a/worker.log"), "{said}");
    assert!(!said.contains("run A ("), "A's seal holds: {said}");
    let last = said.lines().last().unwrap();
    assert!(
        last.starts_with("UNVERIFIED: the seal of run B does not hold"),
        "{said}"
    );
    // Every figure B measured carries the mark; A's do not.
    let row = said.lines().find(|l| l.starts_with("a ")).unwrap();
    assert!(measured_in_b >= 2, "{json:#}");
    assert_eq!(row.matches('?').count(), measured_in_b, "{row}");
    assert_eq!(
        row.matches("? →").count(),
        0,
        "A's figures are verified: {row}"
    );
    assert!(
        stderr(&out).contains(&format!("the seal of {} is BROKEN", b.display())),
        "{}",
        stderr(&out)
    );

    // As JSON, and with A broken instead.
    let out = compare(&b, &a, &["--json", "--max-regression", "1000"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["figures_verified"], false, "{json:#}");
    assert_eq!(json["a"]["seal"]["verified"], false, "{json:#}");
    assert_eq!(json["a"]["seal"]["problems"][0]["kind"], "changed");
    assert_eq!(
        json["a"]["seal"]["problems"][0]["path"],
        "arms/a/worker.log"
    );
    assert_eq!(json["b"]["seal"]["verified"], true, "{json:#}");
    assert_eq!(json["regressions"], serde_json::json!([]));
}

/// `merge --out LINK` (and `run --out LINK`), where LINK is a symbolic link
/// to an empty folder elsewhere, is refused (exit 2) and nothing is written
/// into the folder it points to; a link higher up the path is allowed.
#[test]
fn merge_and_run_refuse_an_out_that_is_a_symbolic_link() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 1\nrequest_ms = 1\nidle_ms = 1\n";
    let (r1, out) = run_into(tmp.path(), "r1", body, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let link = tmp.path().join("fleet-link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();

    let out = merge(&[&r1], &link, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains(&format!("{} is a symbolic link", link.display())),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    let (_, out) = run_into(tmp.path(), "fleet-link", body, &[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("is a symbolic link"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A new folder under the link is the user's choice: written.
    let out = merge(&[&r1], &link.join("fleet"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(elsewhere.join("fleet/fleet.json").is_file());
}

/// `merge` with `extra` arguments into `out`.
fn merge(dirs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| path(d)));
    args.extend(["--out", path(out)]);
    args.extend(extra);
    memqual(&args)
}

fn fleet_report(dir: &Path) -> FleetReport {
    serde_json::from_slice(&std::fs::read(dir.join("fleet.json")).unwrap()).unwrap()
}

/// Two real runs of one host, merged: each run's boot id is this machine's
/// (`/proc/sys/kernel/random/boot_id`, read here), and the boots section
/// holds one boot with both runs and names no reboot.
#[cfg(target_os = "linux")]
#[test]
fn merge_groups_two_runs_of_this_boot_together() {
    const ONE_ARM: &str = r#"
[[arm]]
id = "base"
[arm.calibrate]
requests = 1
request_ms = 1
idle_ms = 1
plateau = { mib = 4 }
"#;
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (r1, out) = run_into(tmp.path(), "r1", ONE_ARM, &["--host-label", "lab"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (r2, out) = run_into(tmp.path(), "r2", ONE_ARM, &["--host-label", "lab"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let fleet = tmp.path().join("fleet");
    let out = merge(&[&r1, &r2], &fleet, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let f = fleet_report(&fleet);
    assert_eq!(f.format_version, "1.1");
    assert_eq!(f.hosts, ["lab"]);
    for r in &f.runs {
        assert_eq!(
            r.boot_id.as_deref(),
            Some(boot_id.as_str()),
            "run {}",
            r.index
        );
    }
    assert_eq!(f.boots.len(), 1);
    assert_eq!(f.boots[0].host, "lab");
    assert_eq!(
        f.boots[0].boots,
        [fleet::fleet::Boot {
            boot_id: Some(boot_id.clone()),
            runs: vec![1, 2],
        }]
    );
    assert!(!f.boots[0].rebooted());
    assert!(
        !f.notes
            .iter()
            .any(|n| n.contains("rebooted") || n.contains("unknown boot")),
        "{:?}",
        f.notes
    );
    let md = std::fs::read_to_string(fleet.join("fleet.md")).unwrap();
    assert!(md.contains("## Boots"), "{md}");
    assert!(md.contains(&format!("| lab | {boot_id} | 1, 2 |")), "{md}");
    let html = std::fs::read_to_string(fleet.join("fleet.html")).unwrap();
    assert!(html.contains("id=\"boots\""), "{html}");
    assert!(html.contains(&boot_id), "{html}");
    let out = memqual(&["verify", path(&fleet)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn merge_three_runs_into_one_sealed_fleet_report() {
    let tmp = tempfile::tempdir().unwrap();
    // Three real runs on this one machine, told apart by their host labels
    // (the flag, and the environment variable CI matrices set).
    let (r1, out) = run_into(tmp.path(), "r1", FLEET, &["--host-label", "lab-a"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (r2, out) = run_into(
        tmp.path(),
        "r2",
        FLEET,
        &[],
        &[("MEMQUAL_HOST_LABEL", Some("lab-b"))],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (r3, out) = run_into(tmp.path(), "r3", FLEET, &["--host-label", "lab-c"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let receipts: Vec<Receipt> = [&r1, &r2, &r3].iter().map(|d| receipt(d)).collect();

    let fleet = tmp.path().join("fleet");
    let summary = tmp.path().join("summary.md");
    let out = {
        let mut args = vec![
            "merge",
            path(&r1),
            path(&r2),
            path(&r3),
            "--out",
            path(&fleet),
        ];
        args.push("--json");
        memqual_env(&args, &[("GITHUB_STEP_SUMMARY", Some(path(&summary)))])
    };
    // `bigger` fails its memory gate on every host.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let f = fleet_report(&fleet);
    let printed: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, f);
    assert_eq!(f.hosts, ["lab-a", "lab-b", "lab-c"]);
    assert_eq!(f.arms, ["base", "bigger", "same"]);
    assert_eq!(f.verdict, Outcome::Fail);
    assert_eq!(f.runs.len(), 3);
    for (i, r) in f.runs.iter().enumerate() {
        assert_eq!(r.dir, path([&r1, &r2, &r3][i]));
        // Each run's boot is its receipt's.
        assert_eq!(
            r.boot_id,
            receipts[i]
                .identity
                .as_ref()
                .and_then(|id| id.host.boot_id.clone())
        );
        assert_eq!(
            Some(&r.receipt_sha256),
            receipts[i].seal.as_ref().map(|s| &s.receipt_sha256)
        );
        // Each run's receipt is kept byte for byte.
        assert_eq!(
            std::fs::read(fleet.join(format!("runs/{}/receipt.json", i + 1))).unwrap(),
            std::fs::read([&r1, &r2, &r3][i].join("receipt.json")).unwrap()
        );
    }
    // Each cell is its receipt's verdict. `bigger` fails its memory gate on
    // every host; whether `same` passes depends on its validity checks
    // (skipped ticks on a busy host), so it is read from the receipts.
    let verdict = |r: &Receipt, arm: &str| {
        r.gates
            .as_ref()
            .unwrap()
            .arms
            .iter()
            .find(|a| a.arm == arm)
            .unwrap()
            .verdict
    };
    for (host, r) in ["lab-a", "lab-b", "lab-c"].iter().zip(&receipts) {
        assert!(f.cell(host, "bigger").unwrap().fails);
        assert_eq!(verdict(r, "bigger"), Outcome::Fail);
        let same = f.cell(host, "same").unwrap();
        assert_eq!(same.verdict, Some(verdict(r, "same")));
        assert_eq!(same.fails, verdict(r, "same") != Outcome::Pass);
        assert_eq!(f.cell(host, "base").unwrap().verdict, None);
    }
    assert_eq!(f.failing_arms[0].name, "bigger");
    assert_eq!(f.failing_arms[0].on, ["lab-a", "lab-b", "lab-c"]);
    assert_eq!(f.failing_hosts.len(), 3);
    // The spread is the three receipts' own values.
    for arm in ["base", "bigger", "same"] {
        let mut values: Vec<f64> = receipts
            .iter()
            .map(|r| {
                let a = r.arms.iter().find(|a| a.id == arm).unwrap();
                a.state_ready_peak().unwrap() as f64
            })
            .collect();
        values.sort_by(f64::total_cmp);
        let s = f
            .spread
            .iter()
            .find(|s| s.arm == arm && s.metric == "state_ready_peak_bytes")
            .unwrap();
        assert_eq!(
            (s.hosts, s.min, s.median, s.max),
            (3, values[0], values[1], values[2])
        );
    }
    // Markdown and HTML carry the table; the step summary got the Markdown.
    let md = std::fs::read_to_string(fleet.join("fleet.md")).unwrap();
    assert!(
        md.contains("**Verdict: FAIL** over 3 run(s) on 3 host(s)"),
        "{md}"
    );
    assert!(md.contains("| lab-b | completed"), "{md}");
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        format!("{md}\n")
    );
    let html = std::fs::read_to_string(fleet.join("fleet.html")).unwrap();
    assert_eq!(html.matches("<th>lab-").count(), 3, "{html}");
    assert!(html.contains("id=\"hosts-by-arms\""));

    // The fleet directory is sealed: verify holds, and names a changed file.
    let out = memqual(&["verify", path(&fleet)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("seal verified"));
    // `report` refuses a fleet directory, and writes nothing into it.
    let out = memqual(&["report", path(&fleet)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("is a fleet directory"),
        "{}",
        text(&out)
    );
    assert!(!fleet.join("raw-seal.json").exists());
    let page = fleet.join("fleet.html");
    std::fs::write(&page, html.replace("lab-b", "lab-x")).unwrap();
    let out = memqual(&["verify", path(&fleet)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CHANGED fleet.html"),
        "{}",
        text(&out)
    );

    // A run whose seal is broken is named, and nothing is written.
    let series = r2.join("arms/base/series.csv");
    let saved = std::fs::read(&series).unwrap();
    let mut changed = saved.clone();
    let last = changed.len() - 2;
    changed[last] ^= 1;
    std::fs::write(&series, &changed).unwrap();
    let refused = tmp.path().join("refused");
    let out = merge(&[&r1, &r2, &r3], &refused, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&format!("{}: seal BROKEN", r2.display())),
        "{said}"
    );
    assert!(said.contains("arms/base/series.csv"), "{said}");
    assert!(
        !said.contains(&format!("{}: seal BROKEN", r1.display())),
        "{said}"
    );
    assert!(!refused.exists());
    std::fs::write(&series, &saved).unwrap();

    // With --pubkey every run must be signed with that key.
    let (key, public) = (tmp.path().join("k.key"), tmp.path().join("k.pub"));
    let out = memqual(&["keygen", "--secret", path(&key), "--public", path(&public)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for r in [&r1, &r3] {
        let out = memqual(&["sign", path(r), "--key", path(&key)]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let signed = tmp.path().join("signed");
    let out = merge(&[&r1, &r3], &signed, &["--pubkey", path(&public)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let f = fleet_report(&signed);
    assert!(
        f.runs.iter().all(|r| r.signature_key_id.is_some()),
        "{f:#?}"
    );
    assert!(signed.join("runs/2/receipt.json.minisig").is_file());
    let out = merge(
        &[&r1, &r2, &r3],
        &tmp.path().join("unsigned"),
        &["--pubkey", path(&public)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&format!("{}: seal BROKEN", r2.display())),
        "{said}"
    );
    assert!(said.contains("no signature"), "{said}");

    // Usage errors: a run given twice, another protocol, a taken --out.
    let out = merge(&[&r1, &r1], &tmp.path().join("twice"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = merge(&[&r1, &r3], &fleet, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = merge(&[&r1, &r3], &r3.join("fleet"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("whose seal it would break"),
        "{}",
        text(&out)
    );
    assert!(!r3.join("fleet").exists());
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (r4, out) = run_into(
        &other,
        "r4",
        "[[arm]]\nid = \"x\"\n[arm.calibrate]\nrequests = 1\n",
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = merge(&[&r1, &r4], &tmp.path().join("mixed"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("a fleet report compares one protocol"),
        "{}",
        text(&out)
    );
    // A label that would break a table or a file name is refused.
    let (_, out) = run_into(tmp.path(), "r5", FLEET, &["--host-label", "a|b"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn shards_split_the_arm_matrix_and_merge_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (s1, out) = run_into(
        tmp.path(),
        "s1",
        FLEET,
        &["--shard", "1/2", "--host-label", "lab-d"],
        &[],
    );
    // Exit 0 when `same` passes (its validity checks depend on the host's load).
    let passed = receipt(&s1).gates.unwrap().verdict == Outcome::Pass;
    assert_eq!(
        out.status.code(),
        Some(if passed { 0 } else { 1 }),
        "{}",
        text(&out)
    );
    let (s2, out) = run_into(
        tmp.path(),
        "s2",
        FLEET,
        &["--shard", "2/2", "--host-label", "lab-d"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "bigger fails: {}", text(&out));
    // Arms 0 and 2 belong to shard 1; arm 1 to shard 2, with its control.
    let (a, b) = (receipt(&s1), receipt(&s2));
    assert_eq!(a.run.arms, ["base", "same"]);
    assert_eq!(b.run.arms, ["base", "bigger"]);
    let shard = b.run.shard.as_ref().unwrap();
    assert_eq!((shard.index, shard.count), (2, 2));
    assert_eq!(shard.protocol_arms, ["base", "bigger", "same"]);
    assert_eq!(shard.owned, ["bigger"]);
    assert_eq!(shard.companions, ["base"]);
    let shard = a.run.shard.as_ref().unwrap();
    assert_eq!(
        (shard.owned.clone(), shard.companions.clone()),
        (vec!["base".to_string(), "same".to_string()], vec![])
    );
    // The comparison was made on the shard's own host.
    assert!(
        b.comparisons
            .iter()
            .any(|c| c.arm == "bigger" && c.control == "base")
    );

    let fleet = tmp.path().join("fleet");
    let out = merge(&[&s1, &s2], &fleet, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let f = fleet_report(&fleet);
    assert_eq!(f.hosts, ["lab-d"]);
    assert_eq!(f.arms, ["base", "bigger", "same"]);
    for arm in ["base", "bigger", "same"] {
        assert!(f.cell("lab-d", arm).is_some(), "{arm}");
    }
    // base was measured by both shards; the table shows its owner's.
    let base = f.cell("lab-d", "base").unwrap();
    assert_eq!((base.run, base.companion), (1, false));
    assert!(
        f.notes
            .iter()
            .any(|n| n.contains("host lab-d, arm base: measured by run 1, run 2")),
        "{:?}",
        f.notes
    );
    assert_eq!(f.failing_arms[0].name, "bigger");

    // More shards than arms, and malformed shards, are usage errors.
    let (_, out) = run_into(tmp.path(), "s4", FLEET, &["--shard", "4/4"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("shard 4/4 has no arm: the protocol has 3 arm(s)"),
        "{}",
        text(&out)
    );
    for bad in ["3/2", "0/2", "1/0", "x"] {
        let (_, out) = run_into(tmp.path(), "bad", FLEET, &["--shard", bad], &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
    }
}

#[test]
fn version_short_and_verbose() {
    let out = memqual(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("memqual {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = memqual(&["version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("memqual {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = memqual(&["version", "--verbose", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The commit this checkout is at (the build script reads the same).
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) if std::env::var_os("MEMQUAL_BUILD_COMMIT").is_none() => {
            assert_eq!(v["commit"], head.as_str())
        }
        _ => assert!(v["commit"].is_string()),
    }
    let whisper = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "memqual-whisper")
        .unwrap();
    assert_eq!(whisper["whisper_cpp"], "1.8.3", "{v:#}");
    assert_eq!(whisper["version"], env!("CARGO_PKG_VERSION"));
    // The test build has no accelerated backend.
    assert_eq!(whisper["features"], serde_json::json!([]), "{v:#}");
    // What ggml finds here: its CPU backend and nothing else.
    let devices = whisper["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{v:#}");
    assert!(devices[0].as_str().unwrap().starts_with("CPU: "), "{v:#}");
    let out = memqual(&["version", "--verbose"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("whisper.cpp 1.8.3, features: none (CPU only), devices: CPU: "),
        "{said}"
    );
    assert!(said.contains("commit: "), "{said}");
    // A worker folder without workers says so, and still exits 0.
    let empty = tempfile::tempdir().unwrap();
    let out = memqual(&["version", "--verbose", "--worker-dir", path(empty.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("memqual-whisper: not found"));
}

/// Every subcommand `memqual --help` lists.
fn subcommands() -> Vec<String> {
    let out = memqual(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = help.find("Commands:").unwrap();
    let names: Vec<String> = help[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // Continuation lines of a description are indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n != "help")
        .collect();
    for expected in ["run", "merge", "compare", "version", "completions", "man"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    names
}

#[test]
fn completions_and_man_pages_cover_every_subcommand() {
    let names = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = memqual(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        for n in &names {
            assert!(script.contains(n.as_str()), "{shell} lacks {n}");
        }
    }
    // bash parses its script.
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("memqual.bash");
    std::fs::write(&script, memqual(&["completions", "bash"]).stdout).unwrap();
    let out = Command::new("bash")
        .args(["-n", path(&script)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // The bash completion offers import's tools.
    let completed = Command::new("bash")
        .args([
            "-c",
            &format!(
                "source {}; COMP_WORDS=(memqual import ''); COMP_CWORD=2; _memqual memqual '' import; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                path(&script)
            ),
        ])
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&completed.stdout);
    for tool in ["vmmap", "smaps_rollup", "memory.stat"] {
        assert!(offered.lines().any(|l| l == tool), "{tool}: {offered}");
    }

    let out = memqual(&["man"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH memqual"),
        "{page}"
    );
    for n in &names {
        // roff writes a hyphen as `\-` (ladder-chart).
        let roff = n.replace('-', "\\-");
        assert!(page.contains(&roff), "the man page lacks {n}");
    }
    let dir = tmp.path().join("man");
    let out = memqual(&["man", "--dir", path(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for n in &names {
        assert!(
            dir.join(format!("memqual-{n}.1")).is_file(),
            "memqual-{n}.1"
        );
    }
    assert!(dir.join("memqual-artifact-inspect.1").is_file());

    // import's TOOL lists its possible values, and refuses others.
    let out = memqual(&["import", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for tool in ["vmmap", "vm_stat", "memory.peak", "smaps_rollup"] {
        assert!(help.contains(tool), "{tool}: {help}");
    }
    let out = memqual(&["import", "vmmapp", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("possible values"), "{}", text(&out));
    // Aliases still work.
    let file = tmp.path().join("peak");
    std::fs::write(&file, "1234\n").unwrap();
    let out = memqual(&["import", "memory.peak", path(&file), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// groff renders the man page without a warning (-k: UTF-8 through
/// preconv, as man does).
#[test]
#[ignore = "needs groff (Debian package groff-base): renders the man page"]
fn the_man_page_renders_in_groff_without_a_warning() {
    let groff = system_tool("groff", "groff-base");
    let out = memqual(&["man"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut child = Command::new(groff)
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let rendered = child.wait_with_output().unwrap();
    assert!(
        rendered.status.success() && rendered.stderr.is_empty(),
        "groff: {}",
        text(&rendered)
    );
}

/// `run` on a terminal (a pseudo-terminal from `script`): an indicatif bar,
/// coloured unless NO_COLOR is set.
#[cfg(target_os = "linux")]
#[test]
fn progress_on_a_terminal_is_a_bar_and_honours_no_color() {
    // Every Debian has it (bsdutils is essential); a test that cannot run fails.
    let script = system_tool("script", "bsdutils");
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), &format!("{FLEET}{LENIENT_ADMISSION}"));
    let run_on_tty = |name: &str, no_color: bool| -> String {
        let out_dir = tmp.path().join(name);
        let log = tmp.path().join(format!("{name}.log"));
        let cmd = format!(
            "{} run {} --out {} >/dev/null",
            MEMQUAL,
            path(&protocol),
            path(&out_dir)
        );
        let mut c = Command::new(&script);
        c.args(["-qefc", &cmd, path(&log)])
            .env("MEMQUAL_WORKER_DIR", worker_dir())
            .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR")
            .env_remove("CLICOLOR_FORCE")
            .stdin(std::process::Stdio::null());
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned()
    };
    let colour = run_on_tty("colour", false);
    assert!(colour.contains("memqual: [2/3] arm bigger"), "{colour}");
    assert!(colour.contains("2/2 requests"), "{colour}");
    assert!(colour.contains("█"), "a bar is drawn: {colour}");
    assert!(colour.contains("\u{1b}[36m"), "cyan bar: {colour:?}");
    let plain = run_on_tty("plain", true);
    assert!(plain.contains("memqual: [2/3] arm bigger"), "{plain}");
    assert!(plain.contains("█"), "{plain}");
    assert!(
        !plain.contains("\u{1b}[36m") && !plain.contains("\u{1b}[1m"),
        "{plain:?}"
    );
}
