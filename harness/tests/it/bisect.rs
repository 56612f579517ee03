//! `memqual bisect` and `memqual run --bisect-exit` on the calibration
//! worker: a plateau whose size is the bisected value, against a memory
//! gate that only sizes above a known one cross. The flip is where the
//! kernel's resident size crosses the gate, read back from each probe's
//! own sealed receipt.

use crate::common::*;
use harness::bisect::summary::{BisectResult, BisectSummary};
use harness::probe_verdict::Judged;
use reports::gates::Outcome;
use std::path::Path;
use std::process::Command;

/// The gate: `state_ready` resident at most 94 MiB. The worker holds
/// about 6 MiB besides its plateau (a debug build; less in release), so a
/// plateau of 80 MiB passes and one of 96 MiB fails, each by about 8 MiB.
const GATE_MIB: u64 = 94;

/// One calibration arm holding `plateau` MiB (a whole-value placeholder)
/// from `model_loaded` on, judged by [`GATE_MIB`]; skipped ticks do not
/// count (a loaded test host must not move the verdict).
fn protocol(plateau: &str) -> String {
    format!(
        r#"[params]
size = "16"

[[arm]]
id = "plateau"
[arm.calibrate]
requests = 1
warmup = 0
request_ms = 1
idle_ms = 1
plateau = {{ mib = {plateau} }}

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
ceiling_mib = {GATE_MIB}

[[arm.gate]]
kind = "validity"
max_skipped_fraction = 1.0
{LENIENT_ADMISSION}"#
    )
}

const SIZES: [u64; 9] = [16, 32, 48, 64, 80, 96, 112, 128, 144];

#[test]
fn bisect_finds_the_first_plateau_size_that_crosses_a_memory_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_protocol(tmp.path(), &protocol("\"${size}\""));
    let out_dir = tmp.path().join("bisect");
    let list: Vec<String> = SIZES.iter().map(u64::to_string).collect();
    let param = format!("size={}", list.join(","));
    let out = memqual(&[
        "bisect",
        path.to_str().unwrap(),
        "--param",
        &param,
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed: BisectSummary = serde_json::from_slice(&out.stdout).unwrap();
    let written: BisectSummary =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("bisect.json")).unwrap())
            .unwrap();
    assert_eq!(printed, written);
    let s = written;

    assert_eq!(
        s.result,
        BisectResult::Found {
            first_differing: "96".into(),
            position: 6,
            last_same: "80".into(),
        }
    );
    // The two ends, then 8 places for the flip halved three times: 5 runs
    // of 9 values, in this order.
    let order: Vec<usize> = s.probes.iter().map(|p| p.position).collect();
    assert_eq!(order, [1, 9, 5, 7, 6]);
    assert_eq!(s.skipped, 0);
    for p in &s.probes {
        let size: u64 = p.value.parse().unwrap();
        let over = size > 80;
        assert_eq!(
            p.judged,
            if over { Judged::Fail } else { Judged::Pass },
            "{p:?}"
        );
        assert_eq!(p.same_as_first, Some(!over), "{p:?}");
        // Each probe is a sealed run of its own, whose receipt says the same.
        let dir = p.run_dir.as_deref().expect("a run directory");
        assert!(
            dir.ends_with(&format!("probes/{}-size-{size}", p.position)),
            "{dir}"
        );
        let r = receipt(Path::new(dir));
        assert_eq!(r.run.params["size"], p.value);
        let verdict = r.gates.as_ref().unwrap().verdict;
        assert_eq!(Some(verdict), p.verdict);
        assert_eq!(verdict, if over { Outcome::Fail } else { Outcome::Pass });
    }

    // What flipped: the memory gate's one check, with the kernel's figures
    // on both sides of the gate.
    assert_eq!(s.flipped.len(), 1, "{:?}", s.flipped);
    let f = &s.flipped[0];
    assert_eq!((f.arm.as_str(), f.gate.as_str()), ("plateau", "memory"));
    assert_eq!(
        (f.before_outcome, f.after_outcome),
        (Outcome::Pass, Outcome::Fail)
    );
    let mib = |v: Option<f64>| v.unwrap() / MIB;
    assert_eq!(mib(f.threshold), GATE_MIB as f64);
    assert!((80.0..GATE_MIB as f64).contains(&mib(f.before)), "{f:?}");
    assert_eq!(f.check, "state_ready resident_bytes");
    assert!((96.0..112.0).contains(&mib(f.after)), "{f:?}");

    let md = std::fs::read_to_string(out_dir.join("bisect.md")).unwrap();
    assert!(
        md.contains("**First differing value: `96`** (position 6)"),
        "{md}"
    );
    assert!(md.contains("5 probe(s) of 9 values, 0 skipped."), "{md}");
}

#[test]
fn bisect_refuses_a_bad_list_or_parameter_before_running_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_protocol(tmp.path(), &protocol("\"${size}\""));
    let out_dir = tmp.path().join("bisect");
    let cases = [
        ("size=", "the list of values is empty"),
        (
            "size=16",
            "only one value (16): a bisection needs at least two",
        ),
        (
            "size=16,32,16",
            "value `16` is given twice (positions 1 and 3)",
        ),
        ("size=16,,32", "value 2 of \"16,,32\" is empty"),
        ("sise=16,32", "`sise` is not a parameter of "),
        // Every value is loaded first: the bound refuses 2 TiB at the placeholder.
        (
            "size=16,2097152,32",
            "with --param size=2097152 (value 2 of 3)",
        ),
    ];
    for (param, message) in cases {
        let out = memqual(&[
            "bisect",
            path.to_str().unwrap(),
            "--param",
            param,
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{param}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{param}: {}", stderr(&out));
        assert!(!out_dir.exists(), "{param}: nothing is created");
    }
    let out = memqual(&["bisect", path.to_str().unwrap(), "--param", "sise=16,32"]);
    assert!(
        stderr(&out).contains("it declares size. Declare it under [params]"),
        "{}",
        stderr(&out)
    );
    let out = memqual(&[
        "bisect",
        path.to_str().unwrap(),
        "--param",
        "size=16,2097152",
    ]);
    assert!(
        stderr(&out).contains("protocol.toml:13:19: arm `plateau`: ")
            && stderr(&out).contains("2097152"),
        "the refused value is located: {}",
        stderr(&out)
    );
}

/// `git` in `repo`, failing the test on error; its stdout.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=memqual",
            "-c",
            "user.email=memqual@localhost",
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn git_bisect_run_lands_on_the_commit_whose_plateau_crosses_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    // One commit per size; the third commit's protocol is refused (2 TiB),
    // so a run there cannot tell: git must skip it, never call it bad.
    let mut commits = Vec::new();
    for (i, size) in [16u64, 32, 2 << 20, 64, 80, 96, 112, 128]
        .iter()
        .enumerate()
    {
        write_protocol(&repo, &protocol(&size.to_string()));
        git(&repo, &["add", "protocol.toml"]);
        git(
            &repo,
            &[
                "commit",
                "-q",
                "-m",
                &format!("commit {i}: plateau {size} MiB"),
            ],
        );
        commits.push(git(&repo, &["rev-parse", "HEAD"]));
    }

    // --bisect-exit on a refused protocol: 125 (skip); without it, 2 as always.
    git(&repo, &["checkout", "-q", &commits[2]]);
    for (flag, code) in [(Some("--bisect-exit"), 125), (None, 2)] {
        let mut args = vec!["run", "protocol.toml", "--out"];
        let out_dir = tmp.path().join(format!("refused-{code}"));
        args.push(out_dir.to_str().unwrap());
        args.extend(flag);
        let out = Command::new(MEMQUAL)
            .args(&args)
            .current_dir(&repo)
            .env("MEMQUAL_WORKER_DIR", worker_dir())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{flag:?}: {}", stderr(&out));
    }
    git(&repo, &["checkout", "-q", &commits[7]]);

    git(&repo, &["bisect", "start", &commits[7], &commits[0]]);
    let runs = tmp.path().join("runs");
    let out = Command::new("git")
        .args(["bisect", "run", "sh", "-c"])
        .arg(r#""$MEMQUAL" run protocol.toml --bisect-exit --out "$RUNS/$(git rev-parse --short HEAD)""#)
        .current_dir(&repo)
        .env("MEMQUAL", MEMQUAL)
        .env("RUNS", &runs)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(out.status.success(), "{said}");
    assert_eq!(
        git(&repo, &["rev-parse", "refs/bisect/bad"]),
        commits[5],
        "the first commit over the gate is the 96 MiB one: {said}"
    );
    assert!(
        said.contains(&format!("{} is the first bad commit", commits[5])),
        "{said}"
    );
    // Each run git asked for is a sealed run whose verdict is the exit code git saw.
    let dirs: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!((2..=5).contains(&dirs.len()), "{dirs:?}");
    for dir in dirs {
        let r = receipt(&dir);
        let size = match &r.arms[0].spec.as_ref().unwrap().worker {
            worker_contract::WorkerSpec::Calibrate(c) => c.plateau.as_ref().unwrap().mib,
            other => panic!("{other:?}"),
        };
        let verdict = r.gates.unwrap().verdict;
        assert_eq!(
            verdict,
            if size > 80 {
                Outcome::Fail
            } else {
                Outcome::Pass
            },
            "{}",
            dir.display()
        );
    }
    git(&repo, &["bisect", "reset"]);
}
