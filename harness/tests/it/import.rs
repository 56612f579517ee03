//! `memqual import` on every committed capture: it succeeds, and its JSON
//! deserializes into the library's types and serializes back unchanged. The
//! human summary shows a column older vmmap lacks as absent, and footprint's
//! shared blocks.

use sampler::captures::{Capture, Parsed, Tool};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shape `import --json` prints.
#[derive(Serialize, Deserialize)]
struct Report {
    file: String,
    #[serde(flatten)]
    parsed: Parsed<Capture>,
}

fn captures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sampler/tests/captures")
}

fn memqual(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memqual"))
        .args(args)
        .output()
        .expect("run memqual")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_capture_imports_and_its_json_round_trips() {
    let mut count = 0;
    for tool in Tool::ALL.map(Tool::name) {
        for path in files(&captures().join(tool)) {
            let file = path.to_str().unwrap();
            let out = memqual(&["import", tool, file, "--json"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{file}: {stderr}");
            let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let report: Report = serde_json::from_value(printed.clone()).unwrap();
            assert!(report.parsed.skipped.is_empty(), "{file}");
            assert_eq!(report.file, file);
            assert_eq!(serde_json::to_value(&report).unwrap(), printed, "{file}");
            let human = memqual(&["import", tool, file]);
            assert!(human.status.success(), "{file}");
            assert!(String::from_utf8_lossy(&human.stdout).starts_with(file));
            count += 1;
        }
    }
    assert_eq!(count, 63);
}

#[test]
fn a_garbled_line_fails_strict_and_is_listed_when_lenient() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(captures().join("meminfo/linux-6.18-a.txt")).unwrap();
    let garbled = src.replacen("Buffers:", "Buffers", 1);
    let path = dir.path().join("meminfo");
    std::fs::write(&path, garbled).unwrap();
    let file = path.to_str().unwrap();
    let strict = memqual(&["import", "meminfo", file]);
    assert_eq!(strict.status.code(), Some(2));
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(err.contains("line 4: expected 'Key: value'"), "{err}");
    // Lenient: the line is skipped, and procfs then misses a required field.
    let lenient = memqual(&["import", "meminfo", file, "--lenient", "--json"]);
    let err = String::from_utf8_lossy(&lenient.stderr);
    assert_eq!(lenient.status.code(), Some(2), "{err}");
    assert!(err.contains("meminfo"), "{err}");

    let vm = std::fs::read_to_string(captures().join("vm_stat/macos-arm64-16k-48gib.txt")).unwrap();
    let path = dir.path().join("vm_stat");
    std::fs::write(&path, vm.replacen("Pageouts:", "Pageouts", 1)).unwrap();
    let out = memqual(&[
        "import",
        "vm_stat",
        path.to_str().unwrap(),
        "--lenient",
        "--json",
    ]);
    assert!(out.status.success());
    let report: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.parsed.skipped.len(), 1);
    assert_eq!(report.parsed.skipped[0].line, 21);
}

#[test]
fn older_vmmap_columns_and_footprint_shared_blocks_in_the_summary() {
    let ocspd = captures().join("vmmap/osx-10.10.5-x86_64-ocspd.txt");
    let out = memqual(&["import", "vmmap", ocspd.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    // OS X 10.10 prints only the virtual size: the rest is absent, not 0.
    assert!(
        text.contains("TOTAL virtual 330.2 MiB (346239795 B), resident -, dirty -, swapped -"),
        "{text}"
    );
    let unreal = captures().join("footprint/macos-arm64-unreal-zsh-shared-cut.txt");
    let out = memqual(&["import", "footprint", unreal.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\n    shared with zsh [25484]: dirty -\n"),
        "{text}"
    );
    assert!(
        text.contains("shared by the group: UnrealEditor [11916], zsh [25484]: dirty -"),
        "{text}"
    );
}

/// An empty capture and one of blank lines only are errors for every tool,
/// naming the file and the output expected; one whose every line is not the
/// tool's output is an error too, strict or `--lenient` (which skips them
/// all, leaving the parser without the lines it needs). Nothing is printed
/// on stdout.
#[test]
fn an_empty_or_unrecognised_capture_is_an_error_for_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let blank = dir.path().join("blank.txt");
    std::fs::write(&blank, "\n   \n\t\n").unwrap();
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello world\nno tool prints this\n").unwrap();
    for tool in Tool::ALL.map(Tool::name) {
        for (path, lenient) in [(&empty, false), (&blank, false), (&blank, true)] {
            let file = path.to_str().unwrap();
            let mut args = vec!["import", tool, file];
            if lenient {
                args.push("--lenient");
            }
            let out = memqual(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{tool} {file}: {err}");
            assert!(out.stdout.is_empty(), "{tool} {file}");
            assert!(
                err.contains(&format!("{file}: empty (")) && err.contains("expected the output of"),
                "{tool} {file}: {err}"
            );
        }
        let file = junk.to_str().unwrap();
        for extra in [&[][..], &["--lenient"][..], &["--lenient", "--json"][..]] {
            let mut args = vec!["import", tool, file];
            args.extend(extra);
            let out = memqual(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{tool} {extra:?}: {err}");
            assert!(out.stdout.is_empty(), "{tool} {extra:?}");
            assert!(err.contains(file), "{tool} {extra:?}: {err}");
        }
    }
    // vmmap, which used to print every field as "-": what it says.
    let out = memqual(&["import", "vmmap", empty.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("expected the output of macOS `vmmap -summary PID`"),
        "{err}"
    );
    let out = memqual(&["import", "vmmap", junk.to_str().unwrap(), "--lenient"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no 'Physical footprint:' line and no REGION TYPE or MALLOC ZONE table"),
        "{err}"
    );
    // A vmmap report header without the footprint or the region table.
    let vmmap = std::fs::read_to_string(
        captures().join("vmmap/macos-13.2.1-x86_64-memory-user-100mib.txt"),
    )
    .unwrap();
    let head: String = vmmap
        .lines()
        .take_while(|l| !l.starts_with("Physical footprint"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(head.lines().count() >= 3, "{head}");
    let headless = dir.path().join("vmmap-head.txt");
    std::fs::write(&headless, head).unwrap();
    let out = memqual(&["import", "vmmap", headless.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no 'Physical footprint:' line and no REGION TYPE or MALLOC ZONE table"),
        "{err}"
    );
}

/// A real meminfo lacking keys names each missing key instead of procfs's
/// "please report this procfs bug"; `MemAvailable` (Linux 3.14+) is optional.
#[test]
fn a_meminfo_lacking_required_keys_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(captures().join("meminfo/linux-6.18-a.txt")).unwrap();
    let without = |keys: &[&str]| -> String {
        src.lines()
            .filter(|l| !keys.iter().any(|k| l.starts_with(&format!("{k}:"))))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let path = dir.path().join("meminfo");
    std::fs::write(&path, without(&["SwapCached", "VmallocChunk"])).unwrap();
    let file = path.to_str().unwrap();
    for extra in [&[][..], &["--lenient", "--json"][..]] {
        let mut args = vec!["import", "meminfo", file];
        args.extend(extra);
        let out = memqual(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(out.stdout.is_empty());
        assert!(
            err.contains(&format!(
                "{file} as meminfo output: meminfo: missing the required keys SwapCached, VmallocChunk"
            )),
            "{err}"
        );
        assert!(
            !err.contains("procfs bug") && !err.contains("Internal"),
            "{err}"
        );
    }
    std::fs::write(&path, without(&["MemTotal"])).unwrap();
    let out = memqual(&["import", "meminfo", file]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing the required key MemTotal (every Linux kernel prints it"),
        "{err}"
    );

    // Without MemAvailable (older kernels): imported, shown as absent.
    std::fs::write(&path, without(&["MemAvailable"])).unwrap();
    let out = memqual(&["import", "meminfo", file, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Report = serde_json::from_slice(&out.stdout).unwrap();
    match report.parsed.value {
        Capture::Meminfo(m) => {
            assert_eq!(m.mem_available, None);
            assert!(m.mem_total > 0);
        }
        other => panic!("not meminfo: {other:?}"),
    }
}
