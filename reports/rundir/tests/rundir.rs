//! The run directory's contract, on real files: exclusive creation, no
//! links followed, no special files read, bounded and torn-line-safe reads,
//! atomic writes, and the source seal.

use run_dir::raw_seal::SealedBy;
use run_dir::{Access, Rel, RunDir, RunDirError, names};
use std::sync::{Arc, Barrier};

fn new_run() -> (tempfile::TempDir, RunDir) {
    let tmp = tempfile::tempdir().unwrap();
    let run = RunDir::create(&tmp.path().join("run")).unwrap();
    (tmp, run)
}

fn arm(run: &RunDir, id: &str) -> Rel {
    let rel = run.arm(id).unwrap();
    run.create_dir(&rel).unwrap();
    rel
}

#[test]
fn of_runs_started_into_one_directory_at_once_exactly_one_proceeds() {
    for _ in 0..20 {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (out, barrier) = (out.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    RunDir::create(&out)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(
                        e,
                        RunDirError::Busy { .. }
                            | RunDirError::NotEmpty { .. }
                            | RunDirError::Claimed { .. }
                    ),
                    "{e}"
                );
            }
        }
    }
}

#[test]
fn a_directory_in_use_or_not_empty_is_refused() {
    let (tmp, run) = new_run();
    let path = tmp.path().join("run");
    let e = RunDir::open(&path, Access::Read).unwrap_err();
    assert!(matches!(e, RunDirError::Busy { .. }), "{e}");
    assert!(
        e.to_string().contains("in use by another memqual process"),
        "{e}"
    );
    drop(run);
    RunDir::open(&path, Access::Read).unwrap();
    let e = RunDir::create(&path).unwrap_err();
    assert!(matches!(e, RunDirError::NotEmpty { .. }), "{e}");
    // An empty directory that exists is fine.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    RunDir::create(&empty).unwrap();
}

#[test]
fn a_new_run_directory_is_never_created_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    let link = tmp.path().join("out");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = RunDir::create(&link).unwrap_err();
    assert!(matches!(e, RunDirError::OutLink { .. }), "{e}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    // A dangling link, and a link to a file, likewise; nothing is created.
    let dangling = tmp.path().join("dangling");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    let e = RunDir::create(&dangling).unwrap_err();
    assert!(matches!(e, RunDirError::OutLink { .. }), "{e}");
    assert!(!tmp.path().join("nowhere").exists());
    // A link higher up the path is the user's choice.
    RunDir::create(&link.join("run")).unwrap();
    assert!(target.join("run/arms").is_dir());
}

#[test]
fn unique_names_step_past_taken_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("runs/x");
    let a = RunDir::create_unique(&base).unwrap();
    let b = RunDir::create_unique(&base).unwrap();
    assert_eq!(a.path(), base);
    assert_eq!(b.path(), tmp.path().join("runs/x-2"));
}

#[test]
fn links_inside_the_run_are_never_followed() {
    let (tmp, run) = new_run();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join(names::MARKERS), "{}\n").unwrap();
    std::fs::write(outside.join("victim.md"), "precious").unwrap();
    // An arm folder replaced by a link: reading through it is refused.
    std::os::unix::fs::symlink(&outside, run.path().join("arms/a")).unwrap();
    let markers = Rel::file(names::ARMS).join("a").join(names::MARKERS);
    let e = run.read_jsonl::<serde_json::Value>(&markers).unwrap_err();
    assert!(matches!(e, RunDirError::Symlink { .. }), "{e}");
    assert!(e.to_string().contains("arms/a is a symbolic link"), "{e}");
    // A file replaced by a link: reading refuses, writing replaces the link.
    let summary = Rel::file(names::SUMMARY);
    std::os::unix::fs::symlink(outside.join("victim.md"), run.path().join(names::SUMMARY)).unwrap();
    assert!(matches!(
        run.read_text(&summary).unwrap_err(),
        RunDirError::Symlink { .. }
    ));
    run.write_bytes(&summary, b"new").unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.md")).unwrap(),
        "precious"
    );
    assert_eq!(
        std::fs::read_to_string(run.path().join(names::SUMMARY)).unwrap(),
        "new"
    );
    // The walk reports the link and does not descend into it.
    let walk = run.walk(&Rel::root()).unwrap();
    assert_eq!(walk.irregular.len(), 1, "{walk:?}");
    assert_eq!(walk.irregular[0].path, "arms/a");
    assert_eq!(walk.irregular[0].what, "symbolic link");
    // Creating a file where a dangling link sits fails; nothing is created outside.
    let log = Rel::file("log.txt");
    std::os::unix::fs::symlink(tmp.path().join("created"), run.path().join("log.txt")).unwrap();
    assert!(run.create_file(&log).is_err());
    assert!(!tmp.path().join("created").exists());
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let (_tmp, run) = new_run();
    let a = arm(&run, "a");
    let fifo = a.join(names::RESULTS);
    nix::unistd::mkfifo(
        &run.display(&fifo),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let e = run.read_jsonl::<serde_json::Value>(&fifo).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
    assert!(run.digest(&fifo).is_err());
    let walk = run.walk(&Rel::root()).unwrap();
    assert_eq!(walk.irregular[0].what, "FIFO (named pipe)");
}

#[test]
fn a_torn_last_line_is_dropped_and_recorded() {
    let (_tmp, run) = new_run();
    let a = arm(&run, "a");
    let markers = a.join(names::MARKERS);
    std::fs::write(run.display(&markers), "{\"n\":1}\n{\"n\":2}\n{\"n\":3").unwrap();
    let values: Vec<serde_json::Value> = run.read_jsonl(&markers).unwrap();
    assert_eq!(values.len(), 2);
    // A cut CSV row: "12" must never be read as the value of "1234".
    let series = a.join(names::SERIES);
    std::fs::write(run.display(&series), "t,v\n1,1000\n2,1234\n3,12").unwrap();
    let mut reader = run.csv_reader(&series).unwrap().unwrap();
    let rows: Vec<(u64, u64)> = reader.deserialize().map(Result::unwrap).collect();
    assert_eq!(rows, [(1, 1000), (2, 1234)]);
    assert_eq!(
        run.recoveries(),
        [
            run_dir::Recovery {
                path: "arms/a/markers.jsonl".into(),
                dropped_bytes: 6
            },
            run_dir::Recovery {
                path: "arms/a/series.csv".into(),
                dropped_bytes: 4
            },
        ]
    );
}

#[test]
fn a_bad_line_in_the_middle_is_an_error_naming_it() {
    let (_tmp, run) = new_run();
    let a = arm(&run, "a");
    let markers = a.join(names::MARKERS);
    std::fs::write(run.display(&markers), "{\"n\":1}\nnot json\n{\"n\":3}\n").unwrap();
    let e = run.read_jsonl::<serde_json::Value>(&markers).unwrap_err();
    assert!(e.to_string().contains("arms/a/markers.jsonl:2: "), "{e}");
}

#[test]
fn reads_are_bounded() {
    let (_tmp, run) = new_run();
    let big = Rel::file(names::RUN);
    let f = std::fs::File::create(run.display(&big)).unwrap();
    f.set_len(run_dir::limits::JSON_RECORD + 1).unwrap();
    let e = run.read_json::<serde_json::Value>(&big).unwrap_err();
    assert!(matches!(e, RunDirError::TooLarge { .. }), "{e}");
    // A single line beyond the line limit.
    let a = arm(&run, "a");
    let lines = a.join(names::MARKERS);
    let f = std::fs::File::create(run.display(&lines)).unwrap();
    f.set_len(run_dir::limits::LINE + 10).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(run.display(&lines))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"\n"))
        .unwrap();
    let e = run.read_jsonl::<serde_json::Value>(&lines).unwrap_err();
    assert!(matches!(e, RunDirError::LineTooLong { line: 1, .. }), "{e}");
}

#[test]
fn atomic_writes_leave_no_temporary_files() {
    let (_tmp, run) = new_run();
    let rel = Rel::file(names::ADMISSION);
    for n in 0..3 {
        run.write_json(&rel, &serde_json::json!({ "n": n }))
            .unwrap();
    }
    let v: serde_json::Value = run.read_json(&rel).unwrap().unwrap();
    assert_eq!(v["n"], 2);
    let names: Vec<String> = std::fs::read_dir(run.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn a_read_only_handle_cannot_write() {
    let (tmp, run) = new_run();
    drop(run);
    let run = RunDir::open(&tmp.path().join("run"), Access::Read).unwrap();
    let e = run
        .write_bytes(&Rel::file(names::SUMMARY), b"x")
        .unwrap_err();
    assert!(matches!(e, RunDirError::ReadOnly { .. }), "{e}");
}

#[test]
fn remove_tree_removes_links_not_their_targets() {
    let (tmp, run) = new_run();
    let a = arm(&run, "a");
    let scratch = a.join(names::SCRATCH);
    run.create_dir(&scratch).unwrap();
    let keep = tmp.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    std::fs::write(keep.join("model.bin"), "weights").unwrap();
    std::os::unix::fs::symlink(&keep, run.display(&scratch.join("link"))).unwrap();
    std::fs::write(run.display(&scratch.join("f")), "x").unwrap();
    run.remove_tree(&scratch).unwrap();
    assert!(!run.display(&scratch).exists());
    assert_eq!(
        std::fs::read_to_string(keep.join("model.bin")).unwrap(),
        "weights"
    );
}

#[test]
fn the_source_seal_catches_every_change_to_a_raw_file() {
    let (_tmp, run) = new_run();
    run.write_bytes(&Rel::file(names::RUN), b"{}").unwrap();
    let a = arm(&run, "a");
    let markers = a.join(names::MARKERS);
    let mut out = run.appender(&markers).unwrap();
    out.append(b"{\"peak\":100}").unwrap();
    run.write_bytes(&a.join(names::ARM), b"{}").unwrap();
    run.seal_raw(&[Rel::file(names::RUN), a.clone()]).unwrap();
    // Derived files are not raw.
    run.write_bytes(&Rel::file(names::SUMMARY), b"derived")
        .unwrap();
    let check = run.check_raw().unwrap();
    assert!(check.holds() && check.unsealed.is_empty(), "{check:?}");

    // Edit the peak; delete arm.json; add a file the run never sealed.
    std::fs::write(run.display(&markers), "{\"peak\":1}\n").unwrap();
    std::fs::remove_file(run.display(&a.join(names::ARM))).unwrap();
    std::fs::write(run.display(&a.join("extra.txt")), "x").unwrap();
    let check = run.check_raw().unwrap();
    assert!(!check.holds());
    assert_eq!(check.changed.len(), 1);
    assert_eq!(check.changed[0].path, "arms/a/markers.jsonl");
    assert_eq!(check.missing[0].path, "arms/a/arm.json");
    // The arm's folder was sealed whole: a new file in it is an addition,
    // refused like a change, never sealed as if a stopped run had left it.
    assert!(check.unsealed.is_empty(), "{check:?}");
    assert_eq!(check.added[0].path, "arms/a/extra.txt");
    assert!(!check.seal_missing);

    // Without reseal nothing is accepted.
    let seal = run.update_raw_seal(&check, None).unwrap();
    assert!(!seal.files.iter().any(|f| f.path == "arms/a/extra.txt"));
    assert!(!run.check_raw().unwrap().holds());
    // A reseal keeps what the seal held before.
    let seal = run
        .update_raw_seal(
            &run.check_raw().unwrap(),
            Some(("2026-12-01T00:00:00Z", "0.1.0")),
        )
        .unwrap();
    assert!(run.check_raw().unwrap().holds());
    assert_eq!(seal.reseals.len(), 1);
    let change = &seal.reseals[0].changes[0];
    assert_eq!(change.path, "arms/a/markers.jsonl");
    assert_eq!(change.before.as_ref().unwrap().bytes, 13);
    assert_eq!(change.after.as_ref().unwrap().bytes, 11);
    let paths: Vec<&str> = seal.reseals[0]
        .changes
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "arms/a/markers.jsonl",
            "arms/a/arm.json",
            "arms/a/extra.txt"
        ]
    );
    let extra = seal
        .files
        .iter()
        .find(|f| f.path == "arms/a/extra.txt")
        .unwrap();
    assert_eq!(extra.sealed_by, SealedBy::Reseal);
}
