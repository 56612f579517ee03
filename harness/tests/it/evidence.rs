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
    let seal_after = std::fs::read(&seal_path).unwrap();
    assert!(
        seal_after == seal_before,
        "a failed reseal rewrote raw-seal.json: now {}",
        String::from_utf8_lossy(&seal_after)
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

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// Finding 2: with `raw-seal.json` deleted and a raw file edited, `report`
/// refuses (the run's digests are gone) and writes nothing; `--reseal`
/// rebuilds the seal, and `verify`, `summary.md` and `report.html` all say
/// that it was rebuilt.
#[test]
fn a_deleted_seal_is_never_rebuilt_silently() {
    let r = sealed_run();
    std::fs::remove_file(r.dir.join("raw-seal.json")).unwrap();
    let log = r.dir.join("arms/plateau/worker.log");
    let mut edited = std::fs::read(&log).unwrap();
    edited.extend_from_slice(b"an edit after the run\n");
    std::fs::write(&log, &edited).unwrap();
    let receipt_before = std::fs::read(r.dir.join("receipt.json")).unwrap();

    let out = memqual(&["report", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("has no raw-seal.json"), "{said}");
    assert!(said.contains("memqual report --reseal"), "{said}");
    assert!(!said.contains("matches its seal"), "{said}");
    assert!(!r.dir.join("raw-seal.json").exists(), "report wrote a seal");
    assert_eq!(
        std::fs::read(r.dir.join("receipt.json")).unwrap(),
        receipt_before
    );
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("MISSING raw-seal.json"),
        "{}",
        text(&out)
    );

    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("RESEALED (raw-seal.json was missing"),
        "{said}"
    );
    assert!(said.contains("the receipt is marked incomplete"), "{said}");

    let out = verify(&r.dir);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("RESEALED raw-seal.json"), "{said}");
    assert!(
        said.contains("raw-seal.json was missing and was rebuilt"),
        "{said}"
    );
    assert!(said.contains("the run is INCOMPLETE"), "{said}");
    let rc = receipt_json(&r.dir);
    assert_eq!(rc["integrity"]["complete"], false);
    assert_eq!(rc["integrity"]["reseals"][0]["seal_was_missing"], true);
    let note = "raw-seal.json was missing: `memqual report --reseal` rebuilt it";
    let summary = read(&r.dir, "summary.md");
    assert!(summary.contains("**INCOMPLETE:**"), "{summary}");
    assert!(summary.contains(note), "{summary}");
    let page = read(&r.dir, "report.html");
    assert!(page.contains("INCOMPLETE: this receipt does not rest"));
    assert!(page.contains(note));
}

fn receipt_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&read(dir, "receipt.json")).unwrap()
}

/// Finding 2, last part: a file added to a finished arm is not absorbed
/// into the seal as if the run had written it.
#[test]
fn a_file_added_to_a_finished_run_is_refused_then_reported_as_resealed() {
    let r = sealed_run();
    std::fs::write(r.dir.join("arms/plateau/extra.jsonl"), "{}\n").unwrap();
    std::fs::write(r.dir.join("notes.txt"), "mine\n").unwrap();
    // An arm run.json never named: not an arm a stopped run left unsealed.
    std::fs::create_dir(r.dir.join("arms/intruder")).unwrap();
    std::fs::write(r.dir.join("arms/intruder/markers.jsonl"), "{}\n").unwrap();
    let seal_before = std::fs::read(r.dir.join("raw-seal.json")).unwrap();

    let out = memqual(&["report", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ADDED arms/plateau/extra.jsonl"), "{said}");
    assert!(said.contains("ADDED notes.txt"), "{said}");
    assert!(said.contains("ADDED arms/intruder/markers.jsonl"), "{said}");
    assert_eq!(
        std::fs::read(r.dir.join("raw-seal.json")).unwrap(),
        seal_before
    );

    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("RESEALED (3 file(s) changed, removed or added"),
        "{said}"
    );
    let out = verify(&r.dir);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("arms/intruder/markers.jsonl, arms/plateau/extra.jsonl, notes.txt"),
        "{said}"
    );
    let rc = receipt_json(&r.dir);
    assert_eq!(rc["integrity"]["complete"], false);
    let changes = rc["integrity"]["reseals"][0]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 3);
    assert!(changes.iter().all(|c| c["before"].is_null()));
    assert!(read(&r.dir, "summary.md").contains("**INCOMPLETE:**"));
}

/// The plateau under a memory gate whose ceiling is a parameter: the
/// default passes, `--param ceiling=2` fails, and both are runs of one
/// protocol (the same digest), as `merge` needs.
const GATED_PLATEAU: &str = "\n[params]\nceiling = \"400\"\n[[arm]]\nid = \"plateau\"\n\
[arm.calibrate]\nrequests = 1\nrequest_ms = 1\nidle_ms = 1\nplateau = { mib = 16 }\n\
[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nceiling_mib = \"${ceiling}\"\n";

fn fleet_md(dir: &Path) -> String {
    read(dir, "fleet.md")
}

/// Finding 3: two runs of one host, one failing, merged in either order:
/// both are in the host × arm table and the failing one is named under
/// "What fails"; the same run given twice under two paths is refused.
#[test]
fn merge_shows_every_run_of_one_host_and_refuses_a_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), &format!("{GATED_PLATEAU}{LENIENT_ADMISSION}"));
    let (pass, fail) = (tmp.path().join("pass"), tmp.path().join("fail"));
    let args = |out: &Path| -> Vec<String> {
        [
            "run",
            path(&protocol),
            "--out",
            path(out),
            "--host-label",
            "lab",
        ]
        .map(String::from)
        .to_vec()
    };
    let a = args(&pass);
    let out = memqual(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut b = args(&fail);
    b.extend(["--param".into(), "ceiling=2".into()]);
    let out = memqual(&b.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    for (order, name) in [([&pass, &fail], "f1"), ([&fail, &pass], "f2")] {
        let fleet = tmp.path().join(name);
        let out = memqual(&[
            "merge",
            path(order[0]),
            path(order[1]),
            "--out",
            path(&fleet),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let md = fleet_md(&fleet);
        assert!(
            md.contains("**Verdict: FAIL** over 2 run(s) on 1 host(s)"),
            "{md}"
        );
        let row = md
            .lines()
            .find(|l| l.starts_with("| lab |"))
            .unwrap_or_else(|| panic!("no row for host lab: {md}"));
        let (p, f) = if name == "f1" { (1, 2) } else { (2, 1) };
        assert!(row.contains(&format!("run {p}: PASS")), "{row}");
        assert!(row.contains(&format!("run {f}: FAIL")), "{row}");
        assert!(!md.contains("No host and no arm fails"), "{md}");
        assert!(md.contains("- host **lab**: plateau"), "{md}");
        let json: serde_json::Value = serde_json::from_str(&read(&fleet, "fleet.json")).unwrap();
        let shown: Vec<bool> = json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["shown"].as_bool().unwrap())
            .collect();
        assert_eq!(shown, [true, true]);
        let page = read(&fleet, "fleet.html");
        assert!(page.contains(&format!("run {p}: PASS")));
        assert!(page.contains(&format!("run {f}: FAIL")));
    }

    // A copy of a run is the same run: refused, by content, not by path.
    let copy = tmp.path().join("copy-of-pass");
    copy_tree(&pass, &copy);
    let fleet = tmp.path().join("f3");
    let out = memqual(&["merge", path(&pass), path(&copy), "--out", path(&fleet)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("is run 1"), "{said}");
    assert!(said.contains("the same sealed receipt"), "{said}");
    assert!(
        !fleet.exists(),
        "a refused merge created {}",
        fleet.display()
    );
}

/// Finding 4: `--param` for a name the protocol does not declare is
/// refused by `run`, `soak` and `bisect` before anything runs, with one
/// message (one rule, in the protocol loader; `calibrate` takes no
/// `--param`).
#[test]
fn an_undeclared_param_is_refused_by_every_command_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), GATED_PLATEAU);
    let p = path(&protocol);
    for (i, command) in [
        vec!["run", p],
        vec!["soak", p, "--requests", "2", "--no-history"],
        vec!["bisect", p],
    ]
    .into_iter()
    .enumerate()
    {
        let out_dir = tmp.path().join(format!("out-{i}"));
        let mut args = command.clone();
        let bisect = command[0] == "bisect";
        args.extend(["--param", if bisect { "sise=96,128" } else { "sise=96" }]);
        args.extend(["--out", path(&out_dir), "--force"]);
        let out = memqual(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {said}");
        assert!(
            said.contains(&format!(
                "`sise` is not a parameter of {p}: it declares ceiling. Declare it under [params]"
            )),
            "{command:?}: {said}"
        );
        assert!(
            !out_dir.exists(),
            "{command:?} created {}",
            out_dir.display()
        );
    }
    // The declared name is taken, and measured.
    let out_dir = tmp.path().join("declared");
    let out = memqual(&[
        "run",
        p,
        "--param",
        "ceiling=2",
        "--out",
        path(&out_dir),
        "--force",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// `depth` nested folders named `d` under `base` (made with `mkdirat` from
/// each new folder: the whole path is far longer than PATH_MAX).
fn nest(base: &Path, depth: usize) {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::{Mode, mkdirat};
    std::fs::create_dir(base).unwrap();
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
    let mut fd = open(base, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&fd, "d", Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(&fd, "d", flags, Mode::empty()).unwrap();
    }
}

/// `memqual ARGS` with its wall time.
fn timed(args: &[&str]) -> (Output, std::time::Duration) {
    let start = std::time::Instant::now();
    let out = memqual(args);
    (out, start.elapsed())
}

/// Finding 5: 5,000 nested empty folders inside a run took verify, report,
/// compare and ladder-chart more than a minute each (every folder was
/// opened again from the run's root), and verify still said "seal
/// verified". Now the walk stops at 16 levels and names the tree; each
/// command answers in seconds. A stray empty folder is named too.
#[test]
fn a_deep_tree_is_named_at_once_and_a_stray_folder_is_reported() {
    let r = sealed_run();
    nest(&r.dir.join("junk"), 5_000);
    let limit = std::time::Duration::from_secs(10);
    let deep = format!("junk/{}", ["d"; 16].join("/"));

    let (out, took) = timed(&["verify", path(&r.dir)]);
    let said = text(&out);
    assert!(took < limit, "verify took {took:?}");
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "IRREGULAR {deep}: a folder nested more than 16 levels deep, which no memqual run writes"
        )),
        "{said}"
    );
    assert!(
        said.contains("ADDED junk: a folder that holds no file of the run"),
        "{said}"
    );
    assert!(
        !said.contains("ADDED junk/d"),
        "one problem per tree: {said}"
    );
    assert!(!said.contains("seal verified"), "{said}");

    let (out, took) = timed(&["report", path(&r.dir)]);
    assert!(took < limit, "report took {took:?}");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "{deep} is a folder nested more than 16 levels deep"
        )),
        "{}",
        text(&out)
    );

    let (out, took) = timed(&["compare", path(&r.dir), path(&r.dir)]);
    assert!(took < limit, "compare took {took:?}");
    assert!(text(&out).contains("seal BROKEN"), "{}", text(&out));

    let chart = r.tmp.path().join("chart.html");
    let (out, took) = timed(&["ladder-chart", path(&r.dir), "--out", path(&chart)]);
    assert!(took < limit, "ladder-chart took {took:?}");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!chart.exists());

    // Without the deep tree, a stray empty folder inside an arm is named.
    std::fs::remove_dir_all(r.dir.join("junk")).unwrap();
    std::fs::create_dir_all(r.dir.join("arms/plateau/stray/deeper")).unwrap();
    let out = verify(&r.dir);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("ADDED arms/plateau/stray: a folder"),
        "{said}"
    );
    std::fs::remove_dir_all(r.dir.join("arms/plateau/stray")).unwrap();
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// Every entry under `dir` (names only, sorted), to show nothing was written.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Finding 6: `report` on a folder that is not a run wrote raw-seal.json
/// there before it refused, and `report /` walked the whole file system
/// first. Both are refused at once, and nothing is written.
#[test]
fn report_refuses_a_folder_that_is_not_a_run_before_writing_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let mine = tmp.path().join("photos");
    std::fs::create_dir_all(mine.join("2026/arms")).unwrap();
    std::fs::write(mine.join("2026/cat.jpg"), "not a run").unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let before = listing(&mine);
    for (dir, reseal) in [(&mine, false), (&mine, true)] {
        let mut args = vec!["report"];
        if reseal {
            args.push("--reseal");
        }
        args.push(path(dir));
        let out = memqual(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(
            said.contains("is not a memqual run directory: it has no run.json"),
            "{said}"
        );
        assert_eq!(
            listing(&mine),
            before,
            "report wrote into {}",
            mine.display()
        );
    }
    let (out, took) = timed(&["report", "/"]);
    assert!(
        took < std::time::Duration::from_secs(5),
        "report / took {took:?}"
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("/ is not a memqual run directory"),
        "{}",
        text(&out)
    );
}

/// A file whose bytes and mode must survive: `(path, bytes, mode)`.
fn precious(dir: &Path) -> (std::path::PathBuf, Vec<u8>, u32) {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join("precious.html");
    std::fs::write(&file, "precious").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    (file, b"precious".to_vec(), 0o600)
}

fn unchanged(file: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::read(file).unwrap(),
        bytes,
        "{} was rewritten",
        file.display()
    );
    let now = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
    assert_eq!(now, mode, "{} changed its mode", file.display());
}

/// Finding 7: `ladder-chart --force` and `--junit` replaced the file a
/// symbolic link points at (and its mode). Both refuse a link before
/// anything is read or run; a link to a stream (`/dev/stdout`) is still
/// written to.
#[test]
fn no_command_writes_through_a_symbolic_link() {
    let r = sealed_run();
    let tmp = r.tmp.path();
    let (file, bytes, mode) = precious(tmp);
    let link = tmp.join("chart.html");
    std::os::unix::fs::symlink(&file, &link).unwrap();

    let out = memqual(&[
        "ladder-chart",
        path(&r.dir),
        "--out",
        path(&link),
        "--force",
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("--out"), "{said}");
    assert!(said.contains("is a symbolic link"), "{said}");
    unchanged(&file, &bytes, mode);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    for flag in ["--junit", "--export-bmf"] {
        let out_dir = tmp.join(format!("run{flag}"));
        let out = memqual(&[
            "run",
            path(&r.protocol),
            "--out",
            path(&out_dir),
            "--force",
            flag,
            path(&link),
        ]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {said}");
        assert!(
            said.contains(&format!("{flag} {} is a symbolic link", link.display())),
            "{said}"
        );
        assert!(!out_dir.exists(), "{flag}: the run went ahead");
        unchanged(&file, &bytes, mode);
    }

    // A link to a stream is written to, never replaced.
    if std::fs::symlink_metadata("/dev/stdout").is_ok_and(|m| m.file_type().is_symlink()) {
        let out_dir = tmp.join("to-stdout");
        let out = memqual(&[
            "run",
            path(&r.protocol),
            "--out",
            path(&out_dir),
            "--force",
            "--json",
            "--export-bmf",
            "/dev/stdout",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("plateau"),
            "{}",
            text(&out)
        );
    }
}

/// Finding 8: an `--out` (or a CI file) inside a sealed run broke that
/// run's seal for `run`, `calibrate`, `bisect` and `ladder-chart`, while
/// `merge` refused it. One rule now refuses it for all of them, before
/// anything runs, and the run's seal still holds.
#[test]
fn no_command_writes_inside_a_sealed_run() {
    let r = sealed_run();
    let p = path(&r.protocol);
    let inside = |name: &str| r.dir.join("arms").join(name);
    let (a, b, c, d, e, f) = (
        inside("new-run"),
        inside("new-cal"),
        inside("new-bisect"),
        inside("chart.html"),
        inside("junit.xml"),
        inside("fleet"),
    );
    let elsewhere = r.tmp.path().join("elsewhere");
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["run", p, "--force", "--out", path(&a)], &a),
        (
            vec![
                "soak",
                p,
                "--requests",
                "2",
                "--no-history",
                "--force",
                "--out",
                path(&a),
            ],
            &a,
        ),
        (
            vec!["calibrate", "--protocol", p, "--force", "--out", path(&b)],
            &b,
        ),
        (vec!["ladder-chart", path(&r.dir), "--out", path(&d)], &d),
        (
            vec![
                "run",
                p,
                "--force",
                "--out",
                path(&elsewhere),
                "--junit",
                path(&e),
            ],
            &e,
        ),
        (vec!["merge", path(&r.dir), "--out", path(&f)], &f),
    ];
    for (args, target) in cases {
        let out = memqual(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(&format!(
                "is inside the run directory {}",
                std::fs::canonicalize(&r.dir).unwrap().display()
            )),
            "{args:?}: {said}"
        );
        assert!(!target.exists(), "{args:?} wrote {}", target.display());
        assert!(!elsewhere.exists(), "{args:?} ran");
    }
    // bisect, whose protocol needs a parameter to search.
    let tmp = tempfile::tempdir().unwrap();
    let gated = write_protocol(tmp.path(), GATED_PLATEAU);
    let out = memqual(&[
        "bisect",
        path(&gated),
        "--param",
        "ceiling=2,400",
        "--force",
        "--out",
        path(&c),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("is inside the run directory"),
        "{}",
        text(&out)
    );
    assert!(!c.exists());
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// The fixture and artifact commands follow the same rule: a generated
/// soak, a synthetic model, a quantized model or a corpus inside a sealed
/// run, or written through a link, is refused before anything is read or
/// written, and the run's seal still holds.
#[test]
fn no_fixture_or_artifact_command_writes_inside_a_run_or_through_a_link() {
    let r = sealed_run();
    let inside = |name: &str| r.dir.join("arms").join(name);
    let (soak, model, quantized, corpus) = (
        inside("soak"),
        inside("model.bin"),
        inside("q5.bin"),
        inside("corpus"),
    );
    // The quantize source need not exist: the output is refused first.
    let missing = r.tmp.path().join("no-such-model.bin");
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (
            vec!["fixtures", "soak-run", path(&soak), "--duration", "1m"],
            &soak,
        ),
        (vec!["fixtures", "synthetic", path(&model)], &model),
        (
            vec![
                "artifact",
                "quantize",
                "--type",
                "q5_0",
                path(&missing),
                path(&quantized),
            ],
            &quantized,
        ),
        (
            vec!["artifact", "corpus", path(&missing), path(&corpus)],
            &corpus,
        ),
    ];
    for (args, target) in cases {
        let out = memqual(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains("is inside the run directory"),
            "{args:?}: {said}"
        );
        assert!(!target.exists(), "{args:?} wrote {}", target.display());
    }
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Through a link: the file it points at keeps its bytes.
    let target = r.tmp.path().join("precious.txt");
    std::fs::write(&target, "keep").unwrap();
    let link = r.tmp.path().join("model-link.bin");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = memqual(&["fixtures", "synthetic", path(&link)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is a symbolic link"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

/// Hostile pass: a control character in an undeclared `--param` name is
/// shown escaped in the refusal, never printed raw to the terminal.
#[test]
fn an_undeclared_param_with_a_control_character_is_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), GATED_PLATEAU);
    let out_dir = tmp.path().join("out");
    let out = memqual(&[
        "run",
        path(&protocol),
        "--param",
        "si\u{1}ze=1",
        "--out",
        path(&out_dir),
        "--force",
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("`si\\u{1}ze` is not a parameter"), "{said}");
    assert!(!said.contains('\u{1}'), "{said:?}");
    assert!(!out_dir.exists());
}

/// Hostile pass: raw-seal.json edited by hand (here, a raw file's digest
/// rewritten to match an edit of that file) was absorbed by `report`: the
/// seal matched the data, and the new manifest listed the edited seal.
/// It is refused against the last manifest's digest of it, and a reseal
/// that accepts it names it.
#[test]
fn an_edited_raw_seal_is_refused_then_named_by_the_reseal() {
    let r = sealed_run();
    let log = r.dir.join("arms/plateau/worker.log");
    let mut edited = std::fs::read(&log).unwrap();
    edited.extend_from_slice(b"forged line\n");
    std::fs::write(&log, &edited).unwrap();
    let seal_path = r.dir.join("raw-seal.json");
    let mut seal: serde_json::Value = serde_json::from_str(&read(&r.dir, "raw-seal.json")).unwrap();
    let digest = {
        use sha2::Digest;
        sha2::Sha256::digest(&edited)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    for f in seal["files"].as_array_mut().unwrap() {
        if f["path"] == "arms/plateau/worker.log" {
            f["sha256"] = digest.clone().into();
            f["bytes"] = (edited.len() as u64).into();
        }
    }
    std::fs::write(&seal_path, seal.to_string()).unwrap();
    let receipt_before = std::fs::read(r.dir.join("receipt.json")).unwrap();

    let out = memqual(&["report", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("raw-seal.json changed after the run was last sealed"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(r.dir.join("receipt.json")).unwrap(),
        receipt_before
    );

    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("RESEALED (raw-seal.json itself had changed"),
        "{said}"
    );
    let out = verify(&r.dir);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("RESEALED raw-seal.json"), "{said}");
    assert!(said.contains(": raw-seal.json"), "{said}");
    assert!(read(&r.dir, "summary.md").contains("**INCOMPLETE:**"));
}

/// Hostile pass: the same `--param` twice kept the last value silently.
#[test]
fn a_param_given_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), GATED_PLATEAU);
    let out_dir = tmp.path().join("out");
    let out = memqual(&[
        "run",
        path(&protocol),
        "--param",
        "ceiling=2",
        "--param",
        "ceiling=400",
        "--out",
        path(&out_dir),
        "--force",
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--param ceiling is given twice (\"2\", then \"400\")"),
        "{said}"
    );
    assert!(!out_dir.exists());
}

/// A garbled manifest.json is a derived file: `report` rebuilds it, as it
/// did before it began comparing raw-seal.json with the manifest's digest.
#[test]
fn a_garbled_manifest_is_rebuilt_by_report() {
    let r = sealed_run();
    std::fs::write(r.dir.join("manifest.json"), "garbage").unwrap();
    let out = memqual(&["report", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("raw data matches its seal"),
        "{}",
        text(&out)
    );
    let out = verify(&r.dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
